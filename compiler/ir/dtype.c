/* dtype.c — ONNX element types: textual-syntax names and sizes. */
#include <string.h>
#include "ir.h"

static const struct { const char *name; int bits; } dt[DT_COUNT_] = {
	[DT_UNDEFINED] = {NULL, 0},
	[DT_FLOAT] = {"float", 32}, [DT_UINT8] = {"uint8", 8},
	[DT_INT8] = {"int8", 8}, [DT_UINT16] = {"uint16", 16},
	[DT_INT16] = {"int16", 16}, [DT_INT32] = {"int32", 32},
	[DT_INT64] = {"int64", 64}, [DT_STRING] = {"string", 0},
	[DT_BOOL] = {"bool", 8}, [DT_FLOAT16] = {"float16", 16},
	[DT_DOUBLE] = {"double", 64}, [DT_UINT32] = {"uint32", 32},
	[DT_UINT64] = {"uint64", 64}, [DT_COMPLEX64] = {"complex64", 64},
	[DT_COMPLEX128] = {"complex128", 128}, [DT_BFLOAT16] = {"bfloat16", 16},
	[DT_FLOAT8E4M3FN] = {"float8e4m3fn", 8},
	[DT_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", 8},
	[DT_FLOAT8E5M2] = {"float8e5m2", 8},
	[DT_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", 8},
	[DT_UINT4] = {"uint4", 4}, [DT_INT4] = {"int4", 4},
};

bool dtype_valid(int t)
{
	return t > DT_UNDEFINED && t < DT_COUNT_;
}

const char *dtype_name(int t)
{
	return dtype_valid(t) ? dt[t].name : NULL;
}

int dtype_from_name(const char *s, size_t n)
{
	for (int t = 1; t < DT_COUNT_; t++)
		if (strlen(dt[t].name) == n && memcmp(dt[t].name, s, n) == 0)
			return t;
	return DT_UNDEFINED;
}

int dtype_bits(int t)
{
	return dtype_valid(t) ? dt[t].bits : 0;
}

size_t dtype_nbytes(int t, int64_t count)
{
	if (count <= 0)
		return 0;
	return (size_t)(((unsigned __int128)count * (unsigned)dtype_bits(t) + 7) / 8);
}

uint16_t dtype_f32_to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof x);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40);
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}
