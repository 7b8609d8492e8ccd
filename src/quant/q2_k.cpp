// STUB: to be replaced by the real format implementation.
#include "common/error.h"
#include "quant/formats.h"
namespace ds4::quant {
namespace { void nyi_deq(const void*, float*, int64_t) { fail("not implemented"); }
void nyi_q(const float*, void*, int64_t, const float*) { fail("not implemented"); } }
const FormatOps& q2_k_ops() { static const FormatOps o{TensorType::F32, TensorType::F32, nyi_deq, nyi_q, {}}; return o; }
}
