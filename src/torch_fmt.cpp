// The compiled part of the fmt that LibTorch ships (its headers, fmt 12, shadow Debian's fmt 9
// in every target that sees Torch's include paths, and libtorch keeps its own copy hidden),
// built once here for every such target (nmt::torch in CMakeLists.txt). Header-only fmt
// (FMT_HEADER_ONLY) compiled this engine again in each source that formats: about 6 s of the
// 7.3 s that a one-function source took at -O3 on 2 cores.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

// The templates format.h declares `extern template` or FMT_API without a definition.
template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;

}  // namespace detail
FMT_END_NAMESPACE
