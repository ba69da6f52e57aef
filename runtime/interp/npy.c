/* npy.c — runtime tensors, float16 conversion, .npy files and ONNX
 * TensorProto (.pb) files.
 *
 * .npy: format versions 1, 2 and 3 (header length u16 for v1, u32 after;
 * v3 only differs in allowing UTF-8 in the header). Data is C order and
 * little endian. Accepted descr: <f4 <f2 <i8 <i4 |i1 |u1 |b1 (and '=' for
 * native order). Fortran order, big-endian data, other dtypes, truncated or
 * over-long data are errors naming the file. Writing picks version 1 when
 * the header fits in 64 KiB, pads the header to a multiple of 64 bytes, and
 * goes through AtomicFile (temporary + rename).
 *
 * .pb: a serialized TensorProto (the test_data_set_N files of the ONNX
 * backend tests): raw_data or the typed repeated fields; every numeric
 * element type; external data and strings are errors.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "interp.h"
#include "onnx.pb-c.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c assumes a little-endian host"
#endif

/* ---------------------------------------------------------------- RTensor */

int64_t rt_numel(const RTensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->dims[i];
	return n;
}

void rt_alloc(RTensor *t, int dtype, int ndim, const int64_t *dims)
{
	WL_ASSERT(ndim >= 0 && ndim <= RT_MAX_DIMS);
	memset(t, 0, sizeof *t);
	t->dtype = dtype;
	t->ndim = ndim;
	for (int i = 0; i < ndim; i++)
		t->dims[i] = dims[i];
	t->nbytes = dtype_nbytes(dtype, rt_numel(t));
	void *p = NULL;
	if (posix_memalign(&p, 64, t->nbytes ? t->nbytes : 64) != 0)
		wl_die(__FILE__, __LINE__, "out of memory (%zu bytes)", t->nbytes);
	memset(p, 0, t->nbytes);
	t->data = p;
	t->owned = true;
}

void rt_free(RTensor *t)
{
	if (t && t->owned)
		free(t->data);
	if (t) {
		t->data = NULL;
		t->owned = false;
		t->nbytes = 0;
	}
}

static const char *np_name(int dt)
{
	switch (dt) {
	case DT_FLOAT: return "float32";
	case DT_FLOAT16: return "float16";
	case DT_DOUBLE: return "float64";
	case DT_BFLOAT16: return "bfloat16";
	default: return dtype_name(dt) ? dtype_name(dt) : "?";
	}
}

const char *rt_describe(const RTensor *t, char *buf, size_t n)
{
	size_t k = (size_t)snprintf(buf, n, "%s[", np_name(t->dtype));
	for (int i = 0; i < t->ndim && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->dims[i]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
	return buf;
}

/* ---------------------------------------------------------------- float16 */

float rt_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
	if (exp == 0x1f) {
		u = sign | 0x7f800000u | (man << 13);       /* inf, NaN (payload kept) */
	} else if (exp != 0) {
		u = sign | ((exp + 112) << 23) | (man << 13);
	} else if (man == 0) {
		u = sign;
	} else {                                          /* subnormal: normalize */
		int e = 113;
		while (!(man & 0x400)) {
			man <<= 1;
			e--;
		}
		u = sign | ((uint32_t)e << 23) | ((man & 0x3ff) << 13);
	}
	return bits_to_f32(u);
}

uint16_t rt_float_to_half(float f)
{
	uint32_t u = f32_to_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t exp = (u >> 23) & 0xff, man = u & 0x7fffff;
	if (exp == 0xff)                                 /* inf or NaN (quiet) */
		return sign | 0x7c00 | (man ? 0x200 | (uint16_t)(man >> 13) : 0);
	int e = (int)exp - 127 + 15;                     /* rebias */
	if (e >= 31)
		return sign | 0x7c00;                    /* overflow */
	if (e <= 0) {                                    /* subnormal or zero */
		if (e < -10)
			return sign;                     /* below half the smallest subnormal */
		man |= 0x800000;                         /* implicit bit */
		int shift = 14 - e;                      /* 24-bit mantissa -> 10-e bits */
		uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (q & 1)))
			q++;
		return sign | (uint16_t)q;               /* a carry into bit 10 gives the smallest normal */
	}
	uint32_t q = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (q & 1)))
		q++;                                     /* may carry into exp, up to inf: right */
	return sign | (uint16_t)q;
}

/* ---------------------------------------------------------------- NaN and Inf */

bool rt_nonfinite_note(const RTensor *t, const char *name, const char *file, char *buf, size_t n)
{
	if (t->dtype != DT_FLOAT && t->dtype != DT_FLOAT16)
		return false;
	int64_t nan = 0, inf = 0, ne = rt_numel(t);
	for (int64_t i = 0; i < ne; i++) {     /* by bits: immune to -ffast-math */
		uint32_t u, exp, man;
		if (t->dtype == DT_FLOAT) {
			memcpy(&u, (const float *)t->data + i, 4);
			exp = u & 0x7f800000u, man = u & 0x7fffffu;
			exp = exp == 0x7f800000u;
		} else {
			u = ((const uint16_t *)t->data)[i];
			exp = (u & 0x7c00u) == 0x7c00u, man = u & 0x3ffu;
		}
		nan += exp && man;
		inf += exp && !man;
	}
	if (!nan && !inf)
		return false;
	snprintf(buf, n, "input '%s' (%s): %lld NaN, %lld Inf: the reference and host code propagate them; "
	         "the Chimera emulation quantizes NaN to 0 and Inf to the extremes of a fixed-point input",
	         name, file, (long long)nan, (long long)inf);
	return true;
}

/* ---------------------------------------------------------------- .npy */

static const struct { const char *descr; int dtype; } npy_types[] = {
	{"f4", DT_FLOAT}, {"f2", DT_FLOAT16}, {"i8", DT_INT64}, {"i4", DT_INT32},
	{"i1", DT_INT8}, {"u1", DT_UINT8}, {"b1", DT_BOOL},
};

static const char *skip_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* Finds the value of 'key' in the header dict; returns pointer after ':'. */
static const char *dict_find(const char *h, const char *e, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = h; p + kl + 2 <= e; p++) {
		if ((*p == '\'' || *p == '"') && p[kl + 1] == *p && memcmp(p + 1, key, kl) == 0) {
			const char *q = skip_ws(p + kl + 2, e);
			if (q < e && *q == ':')
				return skip_ws(q + 1, e);
		}
	}
	return NULL;
}

static int npy_parse_header(const char *path, const char *h, size_t hl, int *dtype,
                            int *ndim, int64_t *dims, Diag *d)
{
	const char *e = h + hl;
	const char *p = dict_find(h, e, "descr");
	if (!p || (*p != '\'' && *p != '"'))
		return diag_fail(d, "%s: malformed .npy header (no descr)", path);
	char q = *p++;
	const char *ds = p;
	while (p < e && *p != q)
		p++;
	if (p >= e)
		return diag_fail(d, "%s: malformed .npy header (descr)", path);
	size_t dl = (size_t)(p - ds);
	char descr[32];
	if (dl == 0 || dl >= sizeof descr)
		return diag_fail(d, "%s: unsupported dtype", path);
	memcpy(descr, ds, dl);
	descr[dl] = 0;
	*dtype = DT_UNDEFINED;
	if (dl == 3 && strchr("<|=>", descr[0])) {
		for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
			if (strcmp(descr + 1, npy_types[i].descr) != 0)
				continue;
			bool one = descr[2] == '1';
			if (descr[0] == '>' && !one)
				return diag_fail(d, "%s: big-endian data ('%s') is not supported", path, descr);
			if (descr[0] == '|' && !one)
				break;
			*dtype = npy_types[i].dtype;
		}
	}
	if (*dtype == DT_UNDEFINED)
		return diag_fail(d, "%s: unsupported dtype '%s' (float32, float16, int64, int32, int8, uint8, bool)", path, descr);

	p = dict_find(h, e, "fortran_order");
	if (!p)
		return diag_fail(d, "%s: malformed .npy header (no fortran_order)", path);
	if ((size_t)(e - p) >= 4 && memcmp(p, "True", 4) == 0)
		return diag_fail(d, "%s: fortran_order arrays are not supported", path);
	if ((size_t)(e - p) < 5 || memcmp(p, "False", 5) != 0)
		return diag_fail(d, "%s: malformed .npy header (fortran_order)", path);

	p = dict_find(h, e, "shape");
	if (!p || *p != '(')
		return diag_fail(d, "%s: malformed .npy header (no shape)", path);
	p++;
	*ndim = 0;
	for (;;) {
		p = skip_ws(p, e);
		if (p >= e)
			return diag_fail(d, "%s: malformed .npy header (shape)", path);
		if (*p == ')')
			break;
		if (*p < '0' || *p > '9')
			return diag_fail(d, "%s: malformed .npy header (shape)", path);
		int64_t v = 0;
		while (p < e && *p >= '0' && *p <= '9') {
			if (v > (INT64_MAX - 9) / 10)
				return diag_fail(d, "%s: .npy shape too large", path);
			v = v * 10 + (*p - '0');
			p++;
		}
		if (p < e && *p == 'L')
			p++;
		if (*ndim >= RT_MAX_DIMS)
			return diag_fail(d, "%s: more than %d dimensions", path, RT_MAX_DIMS);
		dims[(*ndim)++] = v;
		p = skip_ws(p, e);
		if (p < e && *p == ',')
			p++;
	}
	return WL_OK;
}

int npy_read(const char *path, RTensor *out, Diag *d)
{
	memset(out, 0, sizeof *out);
	MappedFile mf;
	if (file_map(path, &mf, d) != WL_OK)
		return WL_ERR;
	int rc = WL_ERR;
	const unsigned char *b = mf.addr;
	size_t n = mf.len;
	if (n < 10 || memcmp(b, "\x93NUMPY", 6) != 0) {
		diag_fail(d, "%s: not a .npy file", path);
		goto done;
	}
	int major = b[6];
	size_t hl, off;
	if (major == 1) {
		hl = (size_t)b[8] | (size_t)b[9] << 8;
		off = 10;
	} else if (major == 2 || major == 3) {
		if (n < 12) {
			diag_fail(d, "%s: truncated .npy header", path);
			goto done;
		}
		hl = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
		off = 12;
	} else {
		diag_fail(d, "%s: unsupported .npy format version %d", path, major);
		goto done;
	}
	if (hl > n - off) {
		diag_fail(d, "%s: truncated .npy header", path);
		goto done;
	}
	int dtype = DT_UNDEFINED, ndim = 0;
	int64_t dims[RT_MAX_DIMS];
	if (npy_parse_header(path, (const char *)b + off, hl, &dtype, &ndim, dims, d) != WL_OK)
		goto done;
	int64_t numel = 1;
	for (int i = 0; i < ndim; i++) {
		if (dims[i] != 0 && numel > INT64_MAX / 8 / dims[i]) {
			diag_fail(d, "%s: .npy shape too large", path);
			goto done;
		}
		numel *= dims[i];
	}
	size_t need = dtype_nbytes(dtype, numel), have = n - off - hl;
	if (have < need) {
		diag_fail(d, "%s: truncated data: %zu bytes, expected %zu", path, have, need);
		goto done;
	}
	if (have > need) {
		diag_fail(d, "%s: %zu bytes after the array data", path, have - need);
		goto done;
	}
	rt_alloc(out, dtype, ndim, dims);
	if (need)
		memcpy(out->data, b + off + hl, need);
	if (dtype == DT_BOOL) {
		for (size_t i = 0; i < need; i++)
			if (((uint8_t *)out->data)[i] > 1) {
				rt_free(out);
				diag_fail(d, "%s: bool array holds a value other than 0 or 1", path);
				goto done;
			}
	}
	rc = WL_OK;
done:
	if (mf.addr)
		munmap(mf.addr, mf.len);
	return rc;
}

int npy_write(const char *path, const RTensor *t, Diag *d)
{
	const char *descr = NULL;
	switch (t->dtype) {
	case DT_FLOAT: descr = "<f4"; break;
	case DT_FLOAT16: descr = "<f2"; break;
	case DT_INT64: descr = "<i8"; break;
	case DT_INT32: descr = "<i4"; break;
	case DT_INT8: descr = "|i1"; break;
	case DT_UINT8: descr = "|u1"; break;
	case DT_BOOL: descr = "|b1"; break;
	default:
		return diag_fail(d, "%s: cannot write dtype %s to .npy", path, np_name(t->dtype));
	}
	char shape[RT_MAX_DIMS * 24 + 8];
	size_t k = 0;
	for (int i = 0; i < t->ndim; i++)
		k += (size_t)snprintf(shape + k, sizeof shape - k, "%lld,%s", (long long)t->dims[i],
		                      (t->ndim > 1 && i + 1 < t->ndim) ? " " : "");
	if (t->ndim > 1)
		k--;            /* "(1, 2, 3)" without the trailing comma, "(5,)" with it */
	shape[k] = 0;
	char hdr[512];
	int hl = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
	/* magic(6) + version(2) + len(2) + header + padding + '\n' ≡ 0 mod 64 */
	size_t total = 10 + (size_t)hl + 1;
	size_t pad = (64 - total % 64) % 64;
	memset(hdr + hl, ' ', pad);
	hdr[hl + pad] = '\n';
	size_t hlen = (size_t)hl + pad + 1;
	size_t need = dtype_nbytes(t->dtype, rt_numel(t));
	if (t->nbytes < need || (need && !t->data))
		return diag_fail(d, "%s: tensor has %zu bytes, expected %zu", path, t->nbytes, need);

	AtomicFile af;
	if (atomic_open(&af, path, d) != WL_OK)
		return WL_ERR;
	unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
	                         (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
	if (fwrite(pre, 1, 10, af.f) != 10 || fwrite(hdr, 1, hlen, af.f) != hlen ||
	    (need && fwrite(t->data, 1, need, af.f) != need)) {
		int e = errno;
		atomic_abort(&af);
		return diag_fail(d, "%s: write failed: %s", path, strerror(e));
	}
	return atomic_commit(&af, d);
}

/* ---------------------------------------------------------------- .pb */

int pb_tensor_read(const char *path, RTensor *out, Diag *d)
{
	memset(out, 0, sizeof *out);
	MappedFile mf;
	if (file_map(path, &mf, d) != WL_OK)
		return WL_ERR;
	Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, mf.len, mf.addr);
	if (mf.addr)
		munmap(mf.addr, mf.len);
	if (!tp)
		return diag_fail(d, "%s: not a TensorProto file", path);
	int rc = WL_ERR;
	int dt = tp->has_data_type ? tp->data_type : DT_UNDEFINED;
	if (!dtype_valid(dt) || dt == DT_STRING || dt == DT_COMPLEX64 || dt == DT_COMPLEX128 ||
	    dtype_bits(dt) < 8) {
		diag_fail(d, "%s: tensor '%s': unsupported element type %d (%s)", path,
		          tp->name ? tp->name : "", dt, dtype_name(dt) ? dtype_name(dt) : "?");
		goto done;
	}
	if (tp->n_dims > RT_MAX_DIMS) {
		diag_fail(d, "%s: tensor has %zu dimensions (at most %d)", path, tp->n_dims, RT_MAX_DIMS);
		goto done;
	}
	if (tp->n_external_data || (tp->has_data_location && tp->data_location == 1)) {
		diag_fail(d, "%s: tensors with external data are not supported here", path);
		goto done;
	}
	int64_t numel = 1;
	for (size_t i = 0; i < tp->n_dims; i++) {
		if (tp->dims[i] < 0 || (tp->dims[i] && numel > INT64_MAX / 16 / tp->dims[i])) {
			diag_fail(d, "%s: bad dimension %lld", path, (long long)tp->dims[i]);
			goto done;
		}
		numel *= tp->dims[i];
	}
	int64_t dims[RT_MAX_DIMS];
	for (size_t i = 0; i < tp->n_dims; i++)
		dims[i] = tp->dims[i];
	size_t need = dtype_nbytes(dt, numel);
	int esz = dtype_bits(dt) / 8;
	if (tp->has_raw_data) {
		if (tp->raw_data.len != need) {
			diag_fail(d, "%s: raw_data has %zu bytes, expected %zu", path, tp->raw_data.len, need);
			goto done;
		}
		rt_alloc(out, dt, (int)tp->n_dims, dims);
		if (need)
			memcpy(out->data, tp->raw_data.data, need);
		rc = WL_OK;
		goto done;
	}
	size_t have;
	switch (dt) {
	case DT_FLOAT: have = tp->n_float_data; break;
	case DT_INT64: have = tp->n_int64_data; break;
	case DT_DOUBLE: have = tp->n_double_data; break;
	case DT_UINT32: case DT_UINT64: have = tp->n_uint64_data; break;
	default: have = tp->n_int32_data; break;
	}
	if ((int64_t)have != numel) {
		diag_fail(d, "%s: %zu typed values, expected %lld", path, have, (long long)numel);
		goto done;
	}
	rt_alloc(out, dt, (int)tp->n_dims, dims);
	unsigned char *o = out->data;
	for (int64_t i = 0; i < numel; i++) {
		unsigned char *e = o + (size_t)i * (size_t)esz;
		switch (dt) {
		case DT_FLOAT: memcpy(e, &tp->float_data[i], 4); break;
		case DT_INT64: memcpy(e, &tp->int64_data[i], 8); break;
		case DT_DOUBLE: memcpy(e, &tp->double_data[i], 8); break;
		case DT_UINT64: memcpy(e, &tp->uint64_data[i], 8); break;
		case DT_UINT32: { uint32_t v = (uint32_t)tp->uint64_data[i]; memcpy(e, &v, 4); break; }
		case DT_INT32: memcpy(e, &tp->int32_data[i], 4); break;
		case DT_INT16: case DT_UINT16: case DT_FLOAT16: case DT_BFLOAT16: {
			uint16_t v = (uint16_t)tp->int32_data[i];
			memcpy(e, &v, 2);
			break;
		}
		case DT_INT8: case DT_UINT8: case DT_BOOL: *e = (unsigned char)tp->int32_data[i]; break;
		default:
			rt_free(out);
			diag_fail(d, "%s: unsupported element type %d", path, dt);
			goto done;
		}
	}
	rc = WL_OK;
done:
	onnx__tensor_proto__free_unpacked(tp, NULL);
	return rc;
}
