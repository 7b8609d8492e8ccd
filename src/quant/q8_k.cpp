// STUB
#include "common/error.h"
#include "quant/formats.h"
namespace ds4::quant {
void quantize_q8_0(const float*, BlockQ8_0*, int64_t) { fail("not implemented"); }
void quantize_q8_k(const float*, BlockQ8_K*, int64_t) { fail("not implemented"); }
void dequantize_q8_k(const BlockQ8_K*, float*, int64_t) { fail("not implemented"); }
}
