#include "gbf/version.hpp"

namespace gbf {

const char* library_version() noexcept { return GBF_VERSION_STRING; }

bool library_has_cuda() noexcept {
#ifdef GBF_HAS_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace gbf
