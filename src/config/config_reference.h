#pragma once
// The configuration reference: every key of a run's config, with its default, the form a
// value must have and its doc, as Markdown. Generated from the schema that reads the keys
// (run_config.cpp), so the reference cannot drift from what nmt-train accepts;
// docs/configuration.md holds a copy that a test compares with it
// (scripts/gen-config-reference.sh rewrites that copy).

#include <string>
#include <string_view>

namespace nmt::config {

/// The first line of docs/configuration.md's generated block (the text up to it is written by
/// hand), and the line that ends it.
inline constexpr std::string_view kReferenceBegin = "<!-- BEGIN config-reference";
inline constexpr std::string_view kReferenceEnd = "<!-- END config-reference";

/// The reference as Markdown: one section per config section (top-level keys first), each a
/// table of key, default, expected form and doc, in the schema's order. Ends with a newline.
std::string config_reference_markdown();

/// The generated block of a Markdown page: the text after the line that starts with
/// kReferenceBegin, up to the line that starts with kReferenceEnd. Throws ConfigError naming
/// `source` when either line is missing.
std::string generated_reference_block(std::string_view page, std::string_view source);

}  // namespace nmt::config
