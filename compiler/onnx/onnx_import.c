/* onnx_import.c — binary ONNX ModelProto → Module.
 *
 * Weights are never copied. protobuf-c's unpack copies every `bytes` field,
 * so the importer walks the top of the file by hand (pbwire.c):
 *
 *   ModelProto      field 7 (graph) is split off; the other fields are
 *                   unpacked by protobuf-c (opsets, metadata, functions...)
 *   GraphProto      field 5 (initializer) is split off; the other fields
 *                   (nodes, inputs, value_info...) are unpacked by protobuf-c
 *   TensorProto     field 9 (raw_data) is located and left in place; the
 *                   rest is unpacked, and Tensor.data points into the file
 *
 * Everything else (attribute tensors, subgraph initializers, typed data) is
 * small or needs conversion anyway and is copied into the module's arena.
 * External data is mapped with file_map and registered with the module.
 * protobuf-c structures are freed as soon as a piece has been converted.
 *
 * A graph is imported in phases: inputs, initializers, then every node is
 * created with its outputs, then node inputs are resolved (this scope, then
 * outward: an outer-scope name registers a Use on the outer Value), then the
 * nodes are sorted topologically (Kahn; files need not be sorted) and linked.
 *
 * Bad input never crashes: pb_check() bounds nesting before protobuf-c sees
 * anything, and every size and count is checked against the bytes present.
 * Subgraphs (If/Loop/Scan bodies) may nest MAX_SUBGRAPH_DEPTH deep: a wire
 * walk (deep_graph) names the first node past that before anything is
 * unpacked, so a deep model gets that message, not "malformed protobuf".
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "compiler/onnx/onnx.h"
#include "onnx.pb-c.h"
#include "pbwire.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "onnx_import.c assumes a little-endian host (ONNX raw_data layout)"
#endif

enum { MAX_SUBGRAPH_DEPTH = 64 };   /* graph attributes nested in each other */
/* protobuf message nesting accepted: a subgraph level is three messages
 * (NodeProto, AttributeProto, GraphProto), plus ModelProto and the types
 * inside the innermost graph */
enum { MAX_NESTING = 3 * MAX_SUBGRAPH_DEPTH + 32 };

typedef struct ExtFile {
	char *location;
	MappedFile mf;
} ExtFile;

typedef struct Buf {
	uint8_t *p;
	size_t len, cap;
} Buf;

typedef struct Imp {
	Module *m;
	Arena *a;
	const char *path;       /* for messages */
	const char *ctx;        /* "function 'F': " while importing one, else "" */
	char *dir;              /* model folder (malloc), NULL: no external data */
	Diag *d;
	ExtFile *ext;
	int next, capext;
} Imp;

/* ---------------------------------------------------------------- helpers */

static int fail(Imp *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
fail(Imp *im, const char *fmt, ...)
{
	char msg[900];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return diag_fail(im->d, "%s: %s%s", im->path, im->ctx ? im->ctx : "", msg);
}

static void *
xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		wl_die(__FILE__, __LINE__, "out of memory (%zu bytes)", n);
	return q;
}

static void
buf_add(Buf *b, const void *p, size_t n)
{
	if (n > b->cap - b->len) {
		size_t nc = b->cap ? b->cap : 256;
		while (nc - b->len < n)
			nc *= 2;
		b->p = xrealloc(b->p, nc);
		b->cap = nc;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

static const char *
str(Imp *im, const char *s)
{
	return arena_strdup(im->a, s ? s : "");
}

static StrRef
bytes_ref(Imp *im, ProtobufCBinaryData b)
{
	StrRef r = {arena_strndup(im->a, (const char *)b.data, b.len), b.len};
	return r;
}

/* "node 'name'" or "node #3 (Conv)" for messages. */
static const char *
node_label(char *buf, size_t n, const char *name, const char *op, size_t idx)
{
	if (name && *name)
		snprintf(buf, n, "node '%s'", name);
	else
		snprintf(buf, n, "node #%zu (%s)", idx, op ? op : "?");
	return buf;
}

/* ---------------------------------------------------------------- types */

static int conv_type(Imp *im, Type *ty, const Onnx__TypeProto *tp);

static int
conv_shape(Imp *im, Type *ty, const Onnx__TensorShapeProto *sp)
{
	if (!sp)
		return WL_OK;
	if (sp->n_dim > INT_MAX)
		return fail(im, "shape has too many dimensions");
	ty->has_shape = true;
	ty->rank = (int)sp->n_dim;
	ty->dims = arena_alloc(im->a, (sp->n_dim ? sp->n_dim : 1) * sizeof *ty->dims);
	for (size_t i = 0; i < sp->n_dim; i++) {
		const Onnx__TensorShapeProto__Dimension *dp = sp->dim[i];
		Dim *dm = &ty->dims[i];
		switch (dp->value_case) {
		case ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE:
			dm->kind = DIM_VALUE;
			dm->value = dp->dim_value;
			break;
		case ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM:
			dm->kind = DIM_PARAM;
			dm->param = str(im, dp->dim_param);
			break;
		default:
			dm->kind = DIM_UNKNOWN;
			break;
		}
		dm->denotation = arena_strdup(im->a, dp->denotation);
	}
	return WL_OK;
}

static Type *
new_inner(Imp *im, const Onnx__TypeProto *tp, int *rc)
{
	if (!tp)
		return NULL;
	Type *t = arena_alloc(im->a, sizeof *t);
	if (conv_type(im, t, tp) != WL_OK)
		*rc = WL_ERR;
	return t;
}

static int
conv_type(Imp *im, Type *ty, const Onnx__TypeProto *tp)
{
	int rc = WL_OK;

	memset(ty, 0, sizeof *ty);
	if (!tp)
		return WL_OK;
	ty->denotation = arena_strdup(im->a, tp->denotation);
	switch (tp->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
		ty->kind = TY_TENSOR;
		ty->elem = tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
		rc = conv_shape(im, ty, tp->tensor_type->shape);
		break;
	case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
		ty->kind = TY_SPARSE_TENSOR;
		ty->elem = tp->sparse_tensor_type->has_elem_type ? tp->sparse_tensor_type->elem_type : 0;
		rc = conv_shape(im, ty, tp->sparse_tensor_type->shape);
		break;
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
		ty->kind = TY_SEQUENCE;
		ty->inner = new_inner(im, tp->sequence_type->elem_type, &rc);
		break;
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
		ty->kind = TY_OPTIONAL;
		ty->inner = new_inner(im, tp->optional_type->elem_type, &rc);
		break;
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
		ty->kind = TY_MAP;
		ty->map_key = tp->map_type->has_key_type ? tp->map_type->key_type : 0;
		ty->inner = new_inner(im, tp->map_type->value_type, &rc);
		break;
	default:
		ty->kind = TY_NONE;
		break;
	}
	if (rc == WL_OK && (ty->kind == TY_TENSOR || ty->kind == TY_SPARSE_TENSOR) &&
	    ty->elem != 0 && !dtype_valid(ty->elem))
		return fail(im, "unknown element type %d", ty->elem);
	return rc;
}

/* ---------------------------------------------------------------- external data */

/* Non-negative decimal integer, nothing else. */
static bool
parse_u63(const char *s, int64_t *out)
{
	int64_t v = 0;

	if (!s || !*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		if (v > (INT64_MAX - (*s - '0')) / 10)
			return false;
		v = v * 10 + (*s - '0');
	}
	*out = v;
	return true;
}

/* Rejects absolute locations and any ".." component ('/' or '\\' separated). */
static bool
location_ok(const char *loc)
{
	if (!*loc || loc[0] == '/' || loc[0] == '\\')
		return false;
	for (const char *p = loc; *p;) {
		size_t n = strcspn(p, "/\\");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return false;
		p += n;
		if (*p)
			p++;
	}
	return true;
}

static int
ext_map(Imp *im, const char *tname, const char *loc, MappedFile **out)
{
	for (int i = 0; i < im->next; i++)
		if (strcmp(im->ext[i].location, loc) == 0) {
			*out = &im->ext[i].mf;
			return WL_OK;
		}
	size_t n = strlen(im->dir) + strlen(loc) + 2;
	char *full = xrealloc(NULL, n);
	snprintf(full, n, "%s/%s", im->dir, loc);
	Diag fd = {0};
	MappedFile mf;
	if (file_map(full, &mf, &fd) != WL_OK) {
		fail(im, "tensor '%s': external data: %s", tname, fd.msg);
		free(full);
		return WL_ERR;
	}
	free(full);
	if (mf.addr)
		module_add_mapping(im->m, mf.addr, mf.len);
	if (im->next == im->capext) {
		im->capext = im->capext ? 2 * im->capext : 4;
		im->ext = xrealloc(im->ext, (size_t)im->capext * sizeof *im->ext);
	}
	im->ext[im->next].location = strdup(loc);
	if (!im->ext[im->next].location)
		wl_die(__FILE__, __LINE__, "out of memory");
	im->ext[im->next].mf = mf;
	*out = &im->ext[im->next++].mf;
	return WL_OK;
}

static int
conv_external(Imp *im, Tensor *t, const Onnx__TensorProto *tp, size_t want)
{
	const char *loc = NULL;
	int64_t off = 0, len = -1;

	for (size_t i = 0; i < tp->n_external_data; i++) {
		const char *k = tp->external_data[i]->key ? tp->external_data[i]->key : "";
		const char *v = tp->external_data[i]->value ? tp->external_data[i]->value : "";
		if (strcmp(k, "location") == 0)
			loc = v;
		else if (strcmp(k, "offset") == 0) {
			if (!parse_u63(v, &off))
				return fail(im, "tensor '%s': bad external data offset '%s'", t->name, v);
		} else if (strcmp(k, "length") == 0) {
			if (!parse_u63(v, &len))
				return fail(im, "tensor '%s': bad external data length '%s'", t->name, v);
		} else {
			KV kv = {str(im, k), str(im, v)};
			t->ext_extra = arena_realloc(im->a, t->ext_extra,
			                             (size_t)t->n_ext_extra * sizeof kv,
			                             (size_t)(t->n_ext_extra + 1) * sizeof kv);
			t->ext_extra[t->n_ext_extra++] = kv;
		}
	}
	if (!loc)
		return fail(im, "tensor '%s': external data without a location", t->name);
	if (!location_ok(loc))
		return fail(im, "tensor '%s': external data location '%s' is absolute or leaves the model's folder",
		            t->name, loc);
	if (!im->dir)
		return fail(im, "tensor '%s': external data '%s' but the model was read from memory",
		            t->name, loc);
	if (t->dtype == DT_STRING)
		return fail(im, "tensor '%s': string tensors cannot use external data", t->name);
	MappedFile *mf;
	if (ext_map(im, t->name, loc, &mf) != WL_OK)
		return WL_ERR;
	if ((uint64_t)off > mf->len)
		return fail(im, "tensor '%s': external data offset %lld is beyond the end of '%s' (%zu bytes)",
		            t->name, (long long)off, loc, mf->len);
	if (len < 0)
		len = (int64_t)(mf->len - (size_t)off);
	if ((uint64_t)len > mf->len - (size_t)off)
		return fail(im, "tensor '%s': external data [%lld, +%lld) runs past the end of '%s' (%zu bytes)",
		            t->name, (long long)off, (long long)len, loc, mf->len);
	if ((uint64_t)len != want)
		return fail(im, "tensor '%s': external data has %lld bytes, expected %zu",
		            t->name, (long long)len, want);
	t->storage = TS_EXTERNAL;
	t->ext_location = str(im, loc);
	t->ext_offset = off;
	t->ext_length = len;
	t->data = want ? (const uint8_t *)mf->addr + off : NULL;
	t->nbytes = want;
	return WL_OK;
}

/* ---------------------------------------------------------------- tensors */

/* Typed fields → raw layout. Narrow types ride in int32_data (onnx.proto):
 * one element per entry, 4-bit types one packed byte per entry. */
static int
conv_typed(Imp *im, Tensor *t, const Onnx__TensorProto *tp, int64_t numel, size_t want)
{
	size_t have = 0, need = (size_t)numel;
	const char *field = "";
	uint8_t *dst;

	t->storage = TS_TYPED;
	if (t->dtype == DT_STRING) {
		if (tp->n_string_data != need)
			return fail(im, "tensor '%s': %zu strings for %lld elements", t->name,
			            tp->n_string_data, (long long)numel);
		t->strs = arena_alloc(im->a, (need ? need : 1) * sizeof *t->strs);
		for (size_t i = 0; i < need; i++)
			t->strs[i] = bytes_ref(im, tp->string_data[i]);
		return WL_OK;
	}
	/* which field, how many entries */
	int w = dtype_bits(t->dtype);
	switch (t->dtype) {
	case DT_FLOAT: case DT_COMPLEX64:
		field = "float_data"; have = tp->n_float_data; need = want / 4;
		break;
	case DT_DOUBLE: case DT_COMPLEX128:
		field = "double_data"; have = tp->n_double_data; need = want / 8;
		break;
	case DT_INT64:
		field = "int64_data"; have = tp->n_int64_data;
		break;
	case DT_UINT32: case DT_UINT64:
		field = "uint64_data"; have = tp->n_uint64_data;
		break;
	case DT_UINT4: case DT_INT4:
		field = "int32_data"; have = tp->n_int32_data; need = want;
		break;
	default:
		field = "int32_data"; have = tp->n_int32_data;
		break;
	}
	size_t others = tp->n_float_data + tp->n_double_data + tp->n_int64_data +
	                tp->n_uint64_data + tp->n_int32_data + tp->n_string_data - have;
	if (others)
		return fail(im, "tensor '%s': %s data stored in the wrong field (expected %s)",
		            t->name, dtype_name(t->dtype), field);
	if (have != need)
		return fail(im, "tensor '%s': %s has %zu entries, expected %zu", t->name, field, have, need);
	dst = arena_alloc(im->a, want ? want : 1);
	t->data = dst;
	t->nbytes = want;
	if (want == 0)
		return WL_OK;
	switch (t->dtype) {
	case DT_FLOAT: case DT_COMPLEX64:
		memcpy(dst, tp->float_data, want);
		break;
	case DT_DOUBLE: case DT_COMPLEX128:
		memcpy(dst, tp->double_data, want);
		break;
	case DT_INT64:
		memcpy(dst, tp->int64_data, want);
		break;
	case DT_UINT64:
		memcpy(dst, tp->uint64_data, want);
		break;
	case DT_UINT32:
		for (size_t i = 0; i < need; i++) {
			uint32_t v = (uint32_t)tp->uint64_data[i];
			memcpy(dst + 4 * i, &v, 4);
		}
		break;
	case DT_INT32:
		memcpy(dst, tp->int32_data, want);
		break;
	default:
		/* 8-bit, 16-bit, and packed 4-bit bytes: low bits of each entry */
		for (size_t i = 0; i < need; i++) {
			uint32_t v = (uint32_t)tp->int32_data[i];
			if (w == 16) {
				uint16_t h = (uint16_t)v;
				memcpy(dst + 2 * i, &h, 2);
			} else
				dst[i] = (uint8_t)v;
		}
		break;
	}
	return WL_OK;
}

/* Checked element count; dims must be non-negative and the byte size must
 * fit comfortably in memory arithmetic. */
static int
checked_numel(Imp *im, const char *name, size_t ndim, const int64_t *dims, int64_t *out)
{
	int64_t n = 1;

	for (size_t i = 0; i < ndim; i++) {
		if (dims[i] < 0)
			return fail(im, "tensor '%s': negative dimension %lld", name, (long long)dims[i]);
		if (!wl_mul_i64(n, dims[i], &n) || n > (int64_t)1 << 55)
			return fail(im, "tensor '%s': too many elements", name);
	}
	*out = n;
	return WL_OK;
}

/* TensorProto → Tensor. `raw` (has_raw) is raw_data found by the caller in
 * the mapped file (zero copy); otherwise tp's own raw_data is copied. */
static int
conv_tensor(Imp *im, const Onnx__TensorProto *tp, const uint8_t *raw, size_t rawlen,
            bool has_raw, Tensor **out)
{
	const char *name = tp->name ? tp->name : "";
	int64_t numel = 0;
	bool copy = false;

	if (!has_raw && tp->has_raw_data) {
		raw = tp->raw_data.data;
		rawlen = tp->raw_data.len;
		has_raw = copy = true;        /* protobuf-c's bytes die with tp */
	}
	if (tp->n_dims > INT_MAX)
		return fail(im, "tensor '%s': too many dimensions", name);
	if (!tp->has_data_type || !dtype_valid(tp->data_type))
		return fail(im, "tensor '%s': unknown data type %d", name,
		            tp->has_data_type ? tp->data_type : 0);
	if (checked_numel(im, name, tp->n_dims, tp->dims, &numel) != WL_OK)
		return WL_ERR;
	Tensor *t = tensor_new(im->a, name, tp->data_type, (int)tp->n_dims, tp->dims);
	t->doc = str(im, tp->doc_string);
	if (tp->segment) {
		t->has_segment = true;
		t->seg_begin = tp->segment->begin;
		t->seg_end = tp->segment->end;
	}
	size_t want = dtype_nbytes(t->dtype, numel);
	bool external = tp->has_data_location &&
	                tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	if (tp->has_data_location && !external &&
	    tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT)
		return fail(im, "tensor '%s': unknown data_location %d", name, (int)tp->data_location);
	int rc;
	if (external) {
		if (has_raw)
			return fail(im, "tensor '%s': both raw_data and external data", name);
		rc = conv_external(im, t, tp, want);
	} else if (has_raw) {
		if (t->dtype == DT_STRING)
			return fail(im, "tensor '%s': string tensor with raw_data", name);
		if (tp->n_float_data || tp->n_int32_data || tp->n_int64_data || tp->n_double_data ||
		    tp->n_uint64_data || tp->n_string_data)
			return fail(im, "tensor '%s': both raw_data and typed data", name);
		if (rawlen != want)
			return fail(im, "tensor '%s': raw_data has %zu bytes, expected %zu (%lld x %s)",
			            name, rawlen, want, (long long)numel, dtype_name(t->dtype));
		if (copy && want) {
			uint8_t *c = arena_alloc(im->a, want);
			memcpy(c, raw, want);
			raw = c;
		}
		t->storage = TS_RAW;
		t->data = want ? raw : NULL;
		t->nbytes = want;
		rc = WL_OK;
	} else
		rc = conv_typed(im, t, tp, numel, want);
	if (rc != WL_OK)
		return WL_ERR;
	*out = t;
	return WL_OK;
}

static int
conv_sparse(Imp *im, const Onnx__SparseTensorProto *sp, SparseTensor **out)
{
	SparseTensor *s = arena_alloc(im->a, sizeof *s);

	if (!sp->values || !sp->indices)
		return fail(im, "sparse tensor without values or indices");
	if (conv_tensor(im, sp->values, NULL, 0, false, &s->values) != WL_OK ||
	    conv_tensor(im, sp->indices, NULL, 0, false, &s->indices) != WL_OK)
		return WL_ERR;
	if (sp->n_dims > INT_MAX)
		return fail(im, "sparse tensor '%s': too many dimensions", s->values->name);
	s->ndim = (int)sp->n_dims;
	s->dims = arena_alloc(im->a, (sp->n_dims ? sp->n_dims : 1) * sizeof *s->dims);
	if (sp->n_dims)
		memcpy(s->dims, sp->dims, sp->n_dims * sizeof *s->dims);
	*out = s;
	return WL_OK;
}

/* ---------------------------------------------------------------- graphs */

/* The main graph's initializers, converted beforehand (zero copy). */
typedef struct InitList {
	Tensor **t;
	size_t n;
} InitList;

static int import_graph(Imp *im, Graph *g, const Onnx__GraphProto *gp, const InitList *pre);

/* Attribute kind of an old (type-less) AttributeProto, from what is set. */
static int
infer_attr_type(const Onnx__AttributeProto *ap)
{
	if (ap->has_f) return AT_FLOAT;
	if (ap->has_i) return AT_INT;
	if (ap->has_s) return AT_STRING;
	if (ap->t) return AT_TENSOR;
	if (ap->g) return AT_GRAPH;
	if (ap->sparse_tensor) return AT_SPARSE_TENSOR;
	if (ap->tp) return AT_TYPE_PROTO;
	if (ap->n_floats) return AT_FLOATS;
	if (ap->n_ints) return AT_INTS;
	if (ap->n_strings) return AT_STRINGS;
	if (ap->n_tensors) return AT_TENSORS;
	if (ap->n_graphs) return AT_GRAPHS;
	if (ap->n_sparse_tensors) return AT_SPARSE_TENSORS;
	if (ap->n_type_protos) return AT_TYPE_PROTOS;
	return AT_UNDEFINED;
}

static int
conv_subgraph(Imp *im, Node *n, const Onnx__GraphProto *gp, Graph **out)
{
	Graph *sg = graph_new(im->m, n->graph, n, gp->name);
	if (import_graph(im, sg, gp, NULL) != WL_OK)
		return WL_ERR;
	*out = sg;
	return WL_OK;
}

/* Fills `at` (not yet attached to the node) from ap. */
static int
conv_attr_value(Imp *im, Node *n, const char *nl, Attr *at, const Onnx__AttributeProto *ap)
{
	size_t cnt = 0;

	switch (at->type) {
	case AT_FLOAT: at->f = ap->f; return WL_OK;
	case AT_INT: at->i = ap->i; return WL_OK;
	case AT_STRING: at->s = bytes_ref(im, ap->s); return WL_OK;
	case AT_TENSOR:
		if (!ap->t)
			break;
		return conv_tensor(im, ap->t, NULL, 0, false, &at->t);
	case AT_GRAPH:
		if (!ap->g)
			break;
		return conv_subgraph(im, n, ap->g, &at->g);
	case AT_SPARSE_TENSOR:
		if (!ap->sparse_tensor)
			break;
		return conv_sparse(im, ap->sparse_tensor, &at->sp);
	case AT_TYPE_PROTO:
		if (!ap->tp)
			break;
		at->tp = arena_alloc(im->a, sizeof *at->tp);
		return conv_type(im, at->tp, ap->tp);
	case AT_FLOATS: cnt = ap->n_floats; break;
	case AT_INTS: cnt = ap->n_ints; break;
	case AT_STRINGS: cnt = ap->n_strings; break;
	case AT_TENSORS: cnt = ap->n_tensors; break;
	case AT_GRAPHS: cnt = ap->n_graphs; break;
	case AT_SPARSE_TENSORS: cnt = ap->n_sparse_tensors; break;
	case AT_TYPE_PROTOS: cnt = ap->n_type_protos; break;
	default:
		return fail(im, "%s: attribute '%s': unknown type %d", nl, at->name, at->type);
	}
	if (at->type < AT_FLOATS || at->type == AT_SPARSE_TENSOR || at->type == AT_TYPE_PROTO)
		return fail(im, "%s: attribute '%s': value missing", nl, at->name);
	if (cnt > INT_MAX)
		return fail(im, "%s: attribute '%s': too many values", nl, at->name);
	at->n = (int)cnt;
	size_t c1 = cnt ? cnt : 1;
	switch (at->type) {
	case AT_FLOATS:
		at->floats = arena_alloc(im->a, c1 * sizeof *at->floats);
		if (cnt)
			memcpy(at->floats, ap->floats, cnt * sizeof *at->floats);
		break;
	case AT_INTS:
		at->ints = arena_alloc(im->a, c1 * sizeof *at->ints);
		if (cnt)
			memcpy(at->ints, ap->ints, cnt * sizeof *at->ints);
		break;
	case AT_STRINGS:
		at->strings = arena_alloc(im->a, c1 * sizeof *at->strings);
		for (size_t i = 0; i < cnt; i++)
			at->strings[i] = bytes_ref(im, ap->strings[i]);
		break;
	case AT_TENSORS:
		at->tensors = arena_alloc(im->a, c1 * sizeof *at->tensors);
		for (size_t i = 0; i < cnt; i++)
			if (conv_tensor(im, ap->tensors[i], NULL, 0, false, &at->tensors[i]) != WL_OK)
				return WL_ERR;
		break;
	case AT_GRAPHS:
		at->graphs = arena_alloc(im->a, c1 * sizeof *at->graphs);
		for (size_t i = 0; i < cnt; i++)
			if (conv_subgraph(im, n, ap->graphs[i], &at->graphs[i]) != WL_OK)
				return WL_ERR;
		break;
	case AT_SPARSE_TENSORS:
		at->sparse = arena_alloc(im->a, c1 * sizeof *at->sparse);
		for (size_t i = 0; i < cnt; i++)
			if (conv_sparse(im, ap->sparse_tensors[i], &at->sparse[i]) != WL_OK)
				return WL_ERR;
		break;
	case AT_TYPE_PROTOS:
		at->types = arena_alloc(im->a, c1 * sizeof *at->types);
		for (size_t i = 0; i < cnt; i++) {
			at->types[i] = arena_alloc(im->a, sizeof *at->types[i]);
			if (conv_type(im, at->types[i], ap->type_protos[i]) != WL_OK)
				return WL_ERR;
		}
		break;
	}
	return WL_OK;
}

static int
conv_attr(Imp *im, Node *n, const char *nl, const Onnx__AttributeProto *ap)
{
	Attr at = {0};

	if (!ap->name || !*ap->name)
		return fail(im, "%s: attribute without a name", nl);
	if (node_attr(n, ap->name))
		return fail(im, "%s: duplicate attribute '%s'", nl, ap->name);
	at.name = str(im, ap->name);
	at.type = ap->has_type ? (int)ap->type : infer_attr_type(ap);
	at.doc = str(im, ap->doc_string);
	at.ref_attr_name = arena_strdup(im->a, ap->ref_attr_name);
	if (at.type == AT_UNDEFINED)
		return fail(im, "%s: attribute '%s' has no type", nl, ap->name);
	if (!at.ref_attr_name && conv_attr_value(im, n, nl, &at, ap) != WL_OK)
		return WL_ERR;
	Attr *dst = node_add_attr(n, at.name, at.type);
	*dst = at;
	return WL_OK;
}

/* ---------------------------------------------------------------- topological order */

/* Node* → index, open addressing (nodes of one graph). */
typedef struct PtrMap {
	const void **key;
	size_t *val;
	size_t cap;
} PtrMap;

static void
pmap_init(PtrMap *pm, size_t n)
{
	pm->cap = 16;
	while (pm->cap < 2 * n + 2)
		pm->cap *= 2;
	pm->key = calloc(pm->cap, sizeof *pm->key);
	pm->val = calloc(pm->cap, sizeof *pm->val);
	if (!pm->key || !pm->val)
		wl_die(__FILE__, __LINE__, "out of memory");
}

static size_t
pmap_slot(const PtrMap *pm, const void *k)
{
	size_t h = ((uintptr_t)k >> 4) * 0x9E3779B97F4A7C15ull;
	size_t i = h & (pm->cap - 1);
	while (pm->key[i] && pm->key[i] != k)
		i = (i + 1) & (pm->cap - 1);
	return i;
}

static bool
pmap_get(const PtrMap *pm, const void *k, size_t *v)
{
	size_t i = pmap_slot(pm, k);
	if (!pm->key[i])
		return false;
	*v = pm->val[i];
	return true;
}

static void
pmap_free(PtrMap *pm)
{
	free(pm->key);
	free(pm->val);
}

typedef struct Edges {
	size_t (*e)[2];
	size_t n, cap;
} Edges;

static void
edge_add(Edges *es, size_t from, size_t to)
{
	if (es->n == es->cap) {
		es->cap = es->cap ? 2 * es->cap : 64;
		es->e = xrealloc(es->e, es->cap * sizeof *es->e);
	}
	es->e[es->n][0] = from;
	es->e[es->n][1] = to;
	es->n++;
}

static void
dep_value(const PtrMap *pm, Edges *es, Value *v, size_t to)
{
	size_t from;
	if (v && v->producer && pmap_get(pm, v->producer, &from))
		edge_add(es, from, to);
}

/* Values of this graph read by subgraphs of a node count as its inputs. */
static void
dep_subgraph(const PtrMap *pm, Edges *es, Graph *sg, size_t to)
{
	for (int i = 0; i < sg->noutputs; i++)
		dep_value(pm, es, sg->outputs[i], to);
	FOR_NODES(sg, sn) {
		for (int i = 0; i < sn->ninputs; i++)
			dep_value(pm, es, sn->inputs[i], to);
		FOR_SUBGRAPHS(sn, ssg)
			dep_subgraph(pm, es, ssg, to);
	}
}

/* Binary min-heap of ready node indices: Kahn's order stays as close to the
 * file's order as the dependencies allow. */
static void
heap_push(size_t *h, size_t *n, size_t x)
{
	size_t i = (*n)++;
	while (i && h[(i - 1) / 2] > x) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = x;
}

static size_t
heap_pop(size_t *h, size_t *n)
{
	size_t top = h[0], x = h[--*n], i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && h[c + 1] < h[c])
			c++;
		if (h[c] >= x)
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
	return top;
}

/* Links nodes[0..n) into g in a topological order. */
static int
sort_and_link(Imp *im, Graph *g, Node **nodes, size_t n)
{
	PtrMap pm;
	Edges es = {0};
	bool sorted = true;
	int rc = WL_OK;

	pmap_init(&pm, n);
	for (size_t i = 0; i < n; i++) {
		size_t s = pmap_slot(&pm, nodes[i]);
		pm.key[s] = nodes[i];
		pm.val[s] = i;
	}
	for (size_t i = 0; i < n; i++) {
		Node *nd = nodes[i];
		for (int k = 0; k < nd->ninputs; k++)
			dep_value(&pm, &es, nd->inputs[k], i);
		FOR_SUBGRAPHS(nd, sg)
			dep_subgraph(&pm, &es, sg, i);
	}
	for (size_t k = 0; k < es.n; k++)
		if (es.e[k][0] >= es.e[k][1])
			sorted = false;
	if (sorted) {
		for (size_t i = 0; i < n; i++)
			node_append(g, nodes[i]);
		goto out;
	}
	/* Kahn over a CSR successor list */
	size_t *indeg = calloc(n + 1, sizeof *indeg), *start = calloc(n + 2, sizeof *start);
	size_t *succ = malloc((es.n + 1) * sizeof *succ), *heap = malloc((n + 1) * sizeof *heap);
	if (!indeg || !start || !succ || !heap)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (size_t k = 0; k < es.n; k++) {
		indeg[es.e[k][1]]++;
		start[es.e[k][0] + 1]++;
	}
	for (size_t i = 0; i < n; i++)
		start[i + 1] += start[i];
	for (size_t k = 0; k < es.n; k++)
		succ[start[es.e[k][0]]++] = es.e[k][1];
	for (size_t i = n; i > 0; i--)          /* start[i] was advanced: shift back */
		start[i] = start[i - 1];
	start[0] = 0;
	size_t nh = 0, done = 0;
	for (size_t i = 0; i < n; i++)
		if (!indeg[i])
			heap_push(heap, &nh, i);
	while (nh) {
		size_t i = heap_pop(heap, &nh);
		node_append(g, nodes[i]);
		done++;
		for (size_t k = start[i]; k < start[i + 1]; k++)
			if (--indeg[succ[k]] == 0)
				heap_push(heap, &nh, succ[k]);
	}
	if (done < n) {
		char nl[300];
		for (size_t i = 0; i < n; i++)
			if (indeg[i]) {
				rc = fail(im, "graph '%s': cycle through %s", g->name,
				          node_label(nl, sizeof nl, nodes[i]->name, nodes[i]->op_type, i));
				break;
			}
	}
	free(indeg);
	free(start);
	free(succ);
	free(heap);
out:
	free(es.e);
	pmap_free(&pm);
	return rc;
}

/* ---------------------------------------------------------------- nodes */

static bool
is_defined_here(const Value *v)
{
	return v->producer || v->is_input || v->init || v->type.kind == TY_SPARSE_TENSOR;
}

/* Phase 1: the node and its outputs. */
static int
create_node(Imp *im, Graph *g, const Onnx__NodeProto *np, size_t idx, Node **out)
{
	char nl[300];

	node_label(nl, sizeof nl, np->name, np->op_type, idx);
	if (!np->op_type || !*np->op_type)
		return fail(im, "%s: missing op_type", nl);
	if (np->n_input > INT_MAX / 2 || np->n_output > INT_MAX / 2)
		return fail(im, "%s: too many inputs or outputs", nl);
	Node *n = node_new(g, np->op_type, np->domain, np->name);
	n->doc = str(im, np->doc_string);
	for (size_t i = 0; i < np->n_output; i++) {
		const char *on = np->output[i];
		if (!*on) {
			node_add_output(n, NULL);
			continue;
		}
		Value *v = graph_find_local(g, on);
		if (v && is_defined_here(v)) {
			char pl[300] = "a graph input or initializer";
			if (v->producer)
				snprintf(pl, sizeof pl, "node '%s'",
				         *v->producer->name ? v->producer->name : v->producer->op_type);
			return fail(im, "%s: output '%s' is already defined (by %s)", nl, on, pl);
		}
		node_add_output(n, graph_value(g, on));
	}
	*out = n;
	return WL_OK;
}

/* Phase 2: inputs (which may be defined later in the file, or outside the
 * graph) and attributes (subgraphs see every value of this graph). */
static int
resolve_node(Imp *im, Graph *g, Node *n, const Onnx__NodeProto *np, size_t idx)
{
	char nl[300];

	node_label(nl, sizeof nl, np->name, np->op_type, idx);
	for (size_t i = 0; i < np->n_input; i++) {
		const char *in = np->input[i];
		Value *v = NULL;
		if (*in) {
			v = graph_find(g, in);
			if (!v || !is_defined_here(v))
				return fail(im, "%s: input '%s' is not defined", nl, in);
		}
		node_add_input(n, v);
	}
	for (size_t i = 0; i < np->n_attribute; i++)
		if (conv_attr(im, n, nl, np->attribute[i]) != WL_OK)
			return WL_ERR;
	return WL_OK;
}

static int
import_nodes(Imp *im, Graph *g, Onnx__NodeProto **nps, size_t n)
{
	Node **nodes = xrealloc(NULL, (n ? n : 1) * sizeof *nodes);
	int rc = WL_OK;

	for (size_t i = 0; rc == WL_OK && i < n; i++)
		rc = create_node(im, g, nps[i], i, &nodes[i]);
	for (size_t i = 0; rc == WL_OK && i < n; i++)
		rc = resolve_node(im, g, nodes[i], nps[i], i);
	if (rc == WL_OK)
		rc = sort_and_link(im, g, nodes, n);
	free(nodes);
	return rc;
}

/* ---------------------------------------------------------------- graph */

static int
add_inputs(Imp *im, Graph *g, const Onnx__GraphProto *gp)
{
	for (size_t i = 0; i < gp->n_input; i++) {
		const Onnx__ValueInfoProto *vi = gp->input[i];
		if (!vi->name || !*vi->name)
			return fail(im, "graph '%s': input #%zu has no name", g->name, i);
		Value *v = graph_find_local(g, vi->name);
		if (v && v->is_input)
			return fail(im, "graph '%s': duplicate input '%s'", g->name, vi->name);
		v = graph_value(g, vi->name);
		graph_add_input(g, v);
		if (conv_type(im, &v->type, vi->type) != WL_OK)
			return WL_ERR;
		v->doc = str(im, vi->doc_string);
	}
	return WL_OK;
}

static int
add_init(Imp *im, Graph *g, Tensor *t)
{
	if (!*t->name)
		return fail(im, "graph '%s': initializer without a name", g->name);
	Value *v = graph_find_local(g, t->name);
	if (v && v->init)
		return fail(im, "graph '%s': duplicate initializer '%s'", g->name, t->name);
	v = graph_value(g, t->name);
	graph_set_init(g, v, t);
	return WL_OK;
}

static int
add_sparse_init(Imp *im, Graph *g, const Onnx__SparseTensorProto *sp)
{
	SparseTensor *s;

	if (conv_sparse(im, sp, &s) != WL_OK)
		return WL_ERR;
	const char *name = s->values->name;
	if (!*name)
		return fail(im, "graph '%s': sparse initializer without a name", g->name);
	Value *v = graph_find_local(g, name);
	if (v && (v->init || v->type.kind == TY_SPARSE_TENSOR))
		return fail(im, "graph '%s': duplicate initializer '%s'", g->name, name);
	v = graph_value(g, name);
	if (!v->is_input) {
		/* the sparse type marks the value as defined (is_defined_here) */
		type_set_tensor(im->a, &v->type, s->values->dtype, s->ndim, s->dims);
		v->type.kind = TY_SPARSE_TENSOR;
	}
	VEC_PUSH(im->a, g->sparse_inits, g->nsparse, g->cap_sparse, s);
	return WL_OK;
}

static int
add_outputs(Imp *im, Graph *g, const Onnx__GraphProto *gp)
{
	for (size_t i = 0; i < gp->n_output; i++) {
		const Onnx__ValueInfoProto *vi = gp->output[i];
		const char *name = vi->name ? vi->name : "";
		Value *v = *name ? graph_find(g, name) : NULL;
		if (!v || !is_defined_here(v))
			return fail(im, "graph '%s': output '%s' is not defined", g->name, name);
		graph_add_output(g, v);
		if (v->type.kind == TY_NONE && conv_type(im, &v->type, vi->type) != WL_OK)
			return WL_ERR;
		if (!*v->doc)
			v->doc = str(im, vi->doc_string);
	}
	return WL_OK;
}

/* value_info of names this graph does not define is dropped. */
static int
add_value_info(Imp *im, Graph *g, const Onnx__GraphProto *gp)
{
	for (size_t i = 0; i < gp->n_value_info; i++) {
		const Onnx__ValueInfoProto *vi = gp->value_info[i];
		Value *v = vi->name ? graph_find_local(g, vi->name) : NULL;
		if (!v || !is_defined_here(v))
			continue;
		v->in_value_info = true;
		if (vi->type && (v->type.kind == TY_NONE || (!v->is_input && !v->is_output && !v->init)))
			if (conv_type(im, &v->type, vi->type) != WL_OK)
				return WL_ERR;
		if (!*v->doc)
			v->doc = str(im, vi->doc_string);
	}
	return WL_OK;
}

/* `pre` (the main graph's zero-copy initializers) replaces gp->initializer
 * when given. */
static int
import_graph(Imp *im, Graph *g, const Onnx__GraphProto *gp, const InitList *pre)
{
	g->name = str(im, gp->name);
	g->doc = str(im, gp->doc_string);
	if (add_inputs(im, g, gp) != WL_OK)
		return WL_ERR;
	if (pre) {
		for (size_t i = 0; i < pre->n; i++)
			if (add_init(im, g, pre->t[i]) != WL_OK)
				return WL_ERR;
	} else {
		for (size_t i = 0; i < gp->n_initializer; i++) {
			Tensor *t;
			if (conv_tensor(im, gp->initializer[i], NULL, 0, false, &t) != WL_OK ||
			    add_init(im, g, t) != WL_OK)
				return WL_ERR;
		}
	}
	for (size_t i = 0; i < gp->n_sparse_initializer; i++)
		if (add_sparse_init(im, g, gp->sparse_initializer[i]) != WL_OK)
			return WL_ERR;
	if (import_nodes(im, g, gp->node, gp->n_node) != WL_OK)
		return WL_ERR;
	if (add_outputs(im, g, gp) != WL_OK)
		return WL_ERR;
	return add_value_info(im, g, gp);
}

/* ---------------------------------------------------------------- main graph (zero copy) */

/* One initializer: raw_data (field 9) stays in the file, the other fields
 * are unpacked by protobuf-c. */
static int
split_initializer(Imp *im, const uint8_t *p, size_t len, Buf *scratch, Tensor **out)
{
	PbReader r;
	PbField f;
	const uint8_t *raw = NULL;
	size_t rawlen = 0;
	bool has_raw = false;
	int rc;

	scratch->len = 0;
	pb_init(&r, p, len);
	while ((rc = pb_next(&r, &f)) > 0) {
		if (f.num == 9 && f.wt == PB_LEN) {
			raw = f.data;
			rawlen = f.len;
			has_raw = true;
		} else
			buf_add(scratch, f.start, (size_t)(f.stop - f.start));
	}
	if (rc < 0)
		return fail(im, "malformed initializer");
	Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, scratch->len, scratch->p);
	if (!tp)
		return fail(im, "malformed initializer");
	rc = conv_tensor(im, tp, raw, rawlen, has_raw, out);
	onnx__tensor_proto__free_unpacked(tp, NULL);
	return rc;
}

static int
import_main_graph(Imp *im, const uint8_t *p, size_t len)
{
	PbReader r;
	PbField f;
	Buf rest = {0}, scratch = {0};
	Tensor **inits = NULL;
	size_t ninit = 0, cap = 0;
	int rc = WL_OK, k = 0;

	pb_init(&r, p, len);
	while (rc == WL_OK && (k = pb_next(&r, &f)) > 0) {
		if (f.num == 5 && f.wt == PB_LEN) {
			Tensor *t;
			rc = split_initializer(im, f.data, f.len, &scratch, &t);
			if (rc != WL_OK)
				break;
			if (ninit == cap) {
				cap = cap ? 2 * cap : 64;
				inits = xrealloc(inits, cap * sizeof *inits);
			}
			inits[ninit++] = t;
		} else
			buf_add(&rest, f.start, (size_t)(f.stop - f.start));
	}
	if (rc == WL_OK && k < 0)
		rc = fail(im, "malformed graph");
	if (rc == WL_OK) {
		Onnx__GraphProto *gp = onnx__graph_proto__unpack(NULL, rest.len, rest.p);
		if (!gp)
			rc = fail(im, "malformed graph");
		else {
			InitList pre = {inits, ninit};
			rc = import_graph(im, im->m->graph, gp, &pre);
			onnx__graph_proto__free_unpacked(gp, NULL);
		}
	}
	free(inits);
	free(rest.p);
	free(scratch.p);
	return rc;
}

/* ---------------------------------------------------------------- functions */

static int
import_function(Imp *im, const Onnx__FunctionProto *fp)
{
	Module *m = im->m;
	Function *fn = arena_alloc(im->a, sizeof *fn);

	if (!fp->name || !*fp->name)
		return fail(im, "function without a name");
	fn->name = str(im, fp->name);
	fn->domain = str(im, fp->domain);
	fn->doc = str(im, fp->doc_string);
	if (fp->n_attribute > INT_MAX || fp->n_opset_import > INT_MAX)
		return fail(im, "function '%s': too many attributes", fn->name);
	fn->nattr_names = (int)fp->n_attribute;
	fn->attr_names = arena_alloc(im->a, (fp->n_attribute + 1) * sizeof *fn->attr_names);
	for (size_t i = 0; i < fp->n_attribute; i++)
		fn->attr_names[i] = str(im, fp->attribute[i]);
	fn->nopsets = (int)fp->n_opset_import;
	fn->opsets = arena_alloc(im->a, (fp->n_opset_import + 1) * sizeof *fn->opsets);
	for (size_t i = 0; i < fp->n_opset_import; i++) {
		fn->opsets[i].domain = str(im, fp->opset_import[i]->domain);
		fn->opsets[i].version = fp->opset_import[i]->version;
	}
	Graph *g = fn->body = graph_new(m, NULL, NULL, fn->name);
	im->ctx = arena_printf(im->a, "function '%s': ", fn->name);
	for (size_t i = 0; i < fp->n_input; i++) {
		Value *v = graph_find_local(g, fp->input[i]);
		if (!*fp->input[i] || v)
			return fail(im, "bad or duplicate input '%s'", fp->input[i]);
		graph_add_input(g, graph_value(g, fp->input[i]));
	}
	if (import_nodes(im, g, fp->node, fp->n_node) != WL_OK)
		return WL_ERR;
	for (size_t i = 0; i < fp->n_output; i++) {
		Value *v = graph_find_local(g, fp->output[i]);
		if (!v || !is_defined_here(v))
			return fail(im, "output '%s' is not defined", fp->output[i]);
		graph_add_output(g, v);
	}
	im->ctx = NULL;
	VEC_PUSH(im->a, m->funcs, m->nfuncs, m->cap_funcs, fn);
	return WL_OK;
}

/* ---------------------------------------------------------------- model */

static int
import_model_fields(Imp *im, const Onnx__ModelProto *mp)
{
	Module *m = im->m;

	m->ir_version = mp->has_ir_version ? mp->ir_version : 0;
	m->producer_name = str(im, mp->producer_name);
	m->producer_version = str(im, mp->producer_version);
	m->domain = str(im, mp->domain);
	m->doc = str(im, mp->doc_string);
	m->model_version = mp->has_model_version ? mp->model_version : 0;
	for (size_t i = 0; i < mp->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
		module_set_opset(m, o->domain ? o->domain : "", o->has_version ? o->version : 0);
	}
	for (size_t i = 0; i < mp->n_metadata_props; i++) {
		KV kv = {str(im, mp->metadata_props[i]->key), str(im, mp->metadata_props[i]->value)};
		VEC_PUSH(im->a, m->metadata, m->nmetadata, m->cap_metadata, kv);
	}
	for (size_t i = 0; i < mp->n_functions; i++)
		if (import_function(im, mp->functions[i]) != WL_OK)
			return WL_ERR;
	return WL_OK;
}

/* ---------------------------------------------------------------- nesting */

/* The first node (name, op_type, index in its graph) whose graph attribute
 * nests deeper than MAX_SUBGRAPH_DEPTH, found on the wire; malformed bytes
 * end the walk (pb_check reports them). Recursion is bounded by the limit. */
typedef struct Deep { ProtobufCBinaryData name, op; size_t idx; bool found; } Deep;

static bool deep_graph(const uint8_t *p, size_t len, int depth, int node_field, Deep *dp);

/* node p sits in a graph at nesting `depth` (main graph: 0) */
static bool
deep_node(const uint8_t *p, size_t len, int depth, size_t idx, Deep *dp)
{
	PbReader r;
	PbField f;

	pb_init(&r, p, len);
	while (pb_next(&r, &f) > 0) {
		if (f.num != 5 || f.wt != PB_LEN)
			continue;
		PbReader ra;
		PbField fa;
		pb_init(&ra, f.data, f.len);
		while (pb_next(&ra, &fa) > 0) {
			if ((fa.num != 6 && fa.num != 11) || fa.wt != PB_LEN)
				continue;
			if (depth + 1 > MAX_SUBGRAPH_DEPTH) {
				*dp = (Deep){{0, NULL}, {0, NULL}, idx, true};
				pb_init(&r, p, len);
				while (pb_next(&r, &f) > 0)
					if (f.num == 3 && f.wt == PB_LEN)
						dp->name = (ProtobufCBinaryData){f.len, (uint8_t *)f.data};
					else if (f.num == 4 && f.wt == PB_LEN)
						dp->op = (ProtobufCBinaryData){f.len, (uint8_t *)f.data};
				return true;
			}
			if (deep_graph(fa.data, fa.len, depth + 1, 1, dp))
				return true;
		}
	}
	return false;
}

/* the nodes of a graph (field 1) or a function (field 7) at nesting depth */
static bool
deep_graph(const uint8_t *p, size_t len, int depth, int node_field, Deep *dp)
{
	PbReader r;
	PbField f;
	size_t idx = 0;

	pb_init(&r, p, len);
	while (pb_next(&r, &f) > 0)
		if (f.num == (uint32_t)node_field && f.wt == PB_LEN && deep_node(f.data, f.len, depth, idx++, dp))
			return true;
	return false;
}

/* ModelProto: graph (7), functions (25) */
static int
check_subgraph_depth(Imp *im, const uint8_t *p, size_t len)
{
	PbReader r;
	PbField f;
	Deep dp = {0};
	char nl[300];

	pb_init(&r, p, len);
	while (!dp.found && pb_next(&r, &f) > 0)
		if (f.wt == PB_LEN && (f.num == 7 || f.num == 25))
			deep_graph(f.data, f.len, 0, f.num == 7 ? 1 : 7, &dp);
	if (!dp.found)
		return WL_OK;
	char name[256], op[128];
	snprintf(name, sizeof name, "%.*s", (int)(dp.name.len < 255 ? dp.name.len : 255),
	         dp.name.data ? (const char *)dp.name.data : "");
	snprintf(op, sizeof op, "%.*s", (int)(dp.op.len < 127 ? dp.op.len : 127), dp.op.data ? (const char *)dp.op.data : "");
	node_label(nl, sizeof nl, name, op, dp.idx);
	if (*name)
		return fail(im, "%s (%s): If/Loop nesting deeper than %d", nl, op, MAX_SUBGRAPH_DEPTH);
	return fail(im, "%s: If/Loop nesting deeper than %d", nl, MAX_SUBGRAPH_DEPTH);
}

static int
import_model(Imp *im, const uint8_t *p, size_t len)
{
	PbReader r;
	PbField f;
	Buf rest = {0};
	const uint8_t *gp = NULL;
	size_t glen = 0;
	int k, rc;

	if (len == 0)
		return fail(im, "empty file");
	int ck = pb_check(p, len, &onnx__model_proto__descriptor, MAX_NESTING);
	if (ck == -1)
		return fail(im, "not an ONNX model (malformed or truncated protobuf)");
	if (check_subgraph_depth(im, p, len) != WL_OK)
		return WL_ERR;
	if (ck < 0)
		return fail(im, "protobuf messages nested deeper than %d", MAX_NESTING);
	pb_init(&r, p, len);
	while ((k = pb_next(&r, &f)) > 0) {
		if (f.num == 7 && f.wt == PB_LEN) {
			if (gp) {
				free(rest.p);
				return fail(im, "more than one graph in the model");
			}
			gp = f.data;
			glen = f.len;
		} else
			buf_add(&rest, f.start, (size_t)(f.stop - f.start));
	}
	Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, rest.len, rest.p);
	free(rest.p);
	if (k < 0 || !mp) {
		if (mp)
			onnx__model_proto__free_unpacked(mp, NULL);
		return fail(im, "not an ONNX model (malformed ModelProto)");
	}
	rc = import_model_fields(im, mp);
	onnx__model_proto__free_unpacked(mp, NULL);
	if (rc != WL_OK)
		return WL_ERR;
	if (!gp)
		return fail(im, "not an ONNX model (no graph)");
	return import_main_graph(im, gp, glen);
}

/* `own` (may be NULL) is the mapping of buf, handed to the module. */
static int
import_impl(const void *buf, size_t len, const char *path, const MappedFile *own,
            Module **out, Diag *d)
{
	Imp im = {0};
	int rc;

	*out = NULL;
	im.d = d;
	im.path = path ? path : "<memory>";
	im.dir = path ? path_dirname(path) : NULL;
	im.m = module_new(path);
	im.a = im.m->arena;
	if (own && own->addr)
		module_add_mapping(im.m, own->addr, own->len);
	im.m->graph = graph_new(im.m, NULL, NULL, "");
	rc = import_model(&im, buf, len);
	if (rc == WL_OK)
		rc = onnx_validate(im.m, d);
	for (int i = 0; i < im.next; i++)
		free(im.ext[i].location);
	free(im.ext);
	free(im.dir);
	if (rc != WL_OK) {
		if (d && !d->set)
			diag_fail(d, "%s: import failed", im.path);
		module_free(im.m);
		return WL_ERR;
	}
	*out = im.m;
	return WL_OK;
}

int
onnx_import_buffer(const void *buf, size_t len, const char *path, Module **out, Diag *d)
{
	return import_impl(buf, len, path, NULL, out, d);
}

int
onnx_import_file(const char *path, Module **out, Diag *d)
{
	MappedFile mf;

	*out = NULL;
	if (file_map(path, &mf, d) != WL_OK)
		return WL_ERR;
	return import_impl(mf.addr, mf.len, path, &mf, out, d);
}

static bool
has_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), k = strlen(suf);
	return n >= k && strcmp(s + n - k, suf) == 0;
}

int
model_read(const char *path, Module **out, Diag *d)
{
	if (has_suffix(path, ".onnxtxt") || has_suffix(path, ".onnxtext") || has_suffix(path, ".txt"))
		return text_parse_file(path, out, d);
	return onnx_import_file(path, out, d);
}
