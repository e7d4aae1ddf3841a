"""Helpers that nmt-train's Python scripts and their tests share (numpy and PyYAML at most; no
torch, no nmt-train code), each module one concern:

  paths          ROOT, DATA, CONFIGS: the checkout's folders
  process        run: a command that must succeed (CommandFailed names it, with its output);
                 run_forwarding_signals: a long one that a signal stops cleanly
  text           read_lines / write_lines / first_lines / write_json(_atomic): UTF-8 files, .gz
                 read too
  checkpoint     checkpoints read with numpy: LAYOUT, safetensors, the run's checkpoints
  stored_config  the config a checkpoint stores (YAML), read with PyYAML
  positions      the position tables of model/embedding.cpp, in numpy
  output_guard   what a script that replaces an output directory may touch
  spm            SentencePiece models for tests and benchmarks (the sentencepiece package)
  venv           starting a script again with the venv's python (NMT_PYTHON of the build)
  stages         a pipeline of stages that resumes where it stopped (markers, settings)
  distill_*      scripts/distill.py's stages: setup (work directory, tools), data, train,
                 eval, report

Scripts under scripts/ import it as `nmt_tools` (scripts/ is on their path; scripts/bench/ puts
it there); the pytest tests get it from tests/scripts/conftest.py.
"""

# Exit status of a script that cannot run here (a package or file absent): CTest's
# SKIP_RETURN_CODE in tests/CMakeLists.txt reads it as skipped.
SKIP_EXIT_CODE = 77
