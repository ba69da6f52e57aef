/* onnx_export.c — Module → binary ONNX ModelProto.
 *
 * The module is mirrored into protobuf-c structures allocated in a scratch
 * arena. Nothing large is copied: raw_data fields point at the tensors' own
 * bytes (often the mmapped input), and the message is packed with a
 * streaming ProtobufCBuffer that fwrite()s into an AtomicFile, so a weight
 * goes from the mapping to the output file without a copy in between.
 *
 * Storage is kept as it was read: TS_RAW → raw_data, TS_TYPED → the typed
 * field onnx.proto assigns to the dtype, TS_EXTERNAL → "<out>.data". When
 * the message would exceed protobuf's 2 GiB limit (sizes are computed before
 * anything is written), or when asked, every tensor of at least the
 * threshold goes to "<out>.data" too; offsets there are 64-byte aligned.
 *
 * The output is deterministic: value_info follows node order, so
 * export(import(export(x))) is byte-identical to export(x).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler/onnx/onnx.h"
#include "onnx.pb-c.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "onnx_export.c assumes a little-endian host (ONNX raw_data layout)"
#endif

enum { EXT_NONE, EXT_KEEP, EXT_ALL };
enum { EXT_ALIGN = 64 };
#define PROTO_LIMIT ((size_t)INT32_MAX)

typedef struct ExtRec {
	const Tensor *t;
	uint64_t off;
} ExtRec;

typedef struct Exp {
	Module *m;
	Arena *a;               /* scratch: every protobuf-c struct */
	Diag *d;
	const char *path;       /* output, for messages */
	int policy;             /* EXT_* */
	size_t threshold;
	size_t limit;           /* protobuf size limit (2 GiB - 1) */
	const char *location;   /* data file name, relative to the output */
	uint64_t data_end;
	ExtRec *ext;
	size_t next, capext;
	int err;
} Exp;

/* ---------------------------------------------------------------- helpers */

static void fail(Exp *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
fail(Exp *e, const char *fmt, ...)
{
	char msg[900];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	diag_fail(e->d, "%s: %s", e->path, msg);
	e->err = 1;
}

static void *
alloc(Exp *e, size_t n)
{
	return arena_alloc(e->a, n ? n : 1);
}

/* Optional string fields: absent when empty. */
static char *
opt(const char *s)
{
	return s && *s ? (char *)s : NULL;
}

static ProtobufCBinaryData
bin(StrRef s)
{
	ProtobufCBinaryData b = {s.len, (uint8_t *)s.ptr};
	return b;
}

#define NEW(e, T, init) ({ T *p_ = alloc((e), sizeof(T)); init(p_); p_; })

/* ---------------------------------------------------------------- types */

static Onnx__TensorShapeProto *
build_shape(Exp *e, const Type *t)
{
	if (!t->has_shape)
		return NULL;
	Onnx__TensorShapeProto *sp = NEW(e, Onnx__TensorShapeProto, onnx__tensor_shape_proto__init);
	sp->n_dim = (size_t)t->rank;
	sp->dim = alloc(e, sp->n_dim * sizeof *sp->dim);
	for (int i = 0; i < t->rank; i++) {
		const Dim *dm = &t->dims[i];
		Onnx__TensorShapeProto__Dimension *dp =
			NEW(e, Onnx__TensorShapeProto__Dimension, onnx__tensor_shape_proto__dimension__init);
		if (dm->kind == DIM_VALUE) {
			dp->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			dp->dim_value = dm->value;
		} else if (dm->kind == DIM_PARAM) {
			dp->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			dp->dim_param = (char *)(dm->param ? dm->param : "");
		}
		dp->denotation = (char *)dm->denotation;
		sp->dim[i] = dp;
	}
	return sp;
}

static Onnx__TypeProto *
build_type(Exp *e, const Type *t)
{
	Onnx__TypeProto *tp = NEW(e, Onnx__TypeProto, onnx__type_proto__init);

	tp->denotation = (char *)t->denotation;
	switch (t->kind) {
	case TY_TENSOR: {
		Onnx__TypeProto__Tensor *x = NEW(e, Onnx__TypeProto__Tensor, onnx__type_proto__tensor__init);
		x->has_elem_type = t->elem != 0;
		x->elem_type = t->elem;
		x->shape = build_shape(e, t);
		tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
		tp->tensor_type = x;
		break;
	}
	case TY_SPARSE_TENSOR: {
		Onnx__TypeProto__SparseTensor *x =
			NEW(e, Onnx__TypeProto__SparseTensor, onnx__type_proto__sparse_tensor__init);
		x->has_elem_type = t->elem != 0;
		x->elem_type = t->elem;
		x->shape = build_shape(e, t);
		tp->value_case = ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE;
		tp->sparse_tensor_type = x;
		break;
	}
	case TY_SEQUENCE: {
		Onnx__TypeProto__Sequence *x = NEW(e, Onnx__TypeProto__Sequence, onnx__type_proto__sequence__init);
		x->elem_type = t->inner ? build_type(e, t->inner) : NULL;
		tp->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
		tp->sequence_type = x;
		break;
	}
	case TY_OPTIONAL: {
		Onnx__TypeProto__Optional *x = NEW(e, Onnx__TypeProto__Optional, onnx__type_proto__optional__init);
		x->elem_type = t->inner ? build_type(e, t->inner) : NULL;
		tp->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
		tp->optional_type = x;
		break;
	}
	case TY_MAP: {
		Onnx__TypeProto__Map *x = NEW(e, Onnx__TypeProto__Map, onnx__type_proto__map__init);
		x->has_key_type = t->map_key != 0;
		x->key_type = t->map_key;
		x->value_type = t->inner ? build_type(e, t->inner) : NULL;
		tp->value_case = ONNX__TYPE_PROTO__VALUE_MAP_TYPE;
		tp->map_type = x;
		break;
	}
	default:
		break;
	}
	return tp;
}

static Onnx__ValueInfoProto *
build_vi(Exp *e, const Value *v)
{
	Onnx__ValueInfoProto *vi = NEW(e, Onnx__ValueInfoProto, onnx__value_info_proto__init);

	vi->name = (char *)v->name;
	if (v->type.kind != TY_NONE || v->type.denotation)
		vi->type = build_type(e, &v->type);
	vi->doc_string = opt(v->doc);
	return vi;
}

/* ---------------------------------------------------------------- tensors */

static bool
goes_external(const Exp *e, const Tensor *t)
{
	if (e->policy == EXT_NONE || t->dtype == DT_STRING)
		return false;
	if (t->storage == TS_EXTERNAL)
		return true;
	return e->policy == EXT_ALL && t->nbytes >= e->threshold;
}

static Onnx__StringStringEntryProto *
kv(Exp *e, const char *k, const char *v)
{
	Onnx__StringStringEntryProto *p =
		NEW(e, Onnx__StringStringEntryProto, onnx__string_string_entry_proto__init);
	p->key = (char *)k;
	p->value = (char *)v;
	return p;
}

static void
set_external(Exp *e, Onnx__TensorProto *tp, const Tensor *t)
{
	uint64_t off = (e->data_end + EXT_ALIGN - 1) / EXT_ALIGN * EXT_ALIGN;

	e->data_end = off + t->nbytes;
	if (e->next == e->capext) {
		e->capext = e->capext ? 2 * e->capext : 64;
		ExtRec *n = realloc(e->ext, e->capext * sizeof *n);
		if (!n)
			wl_die(__FILE__, __LINE__, "out of memory");
		e->ext = n;
	}
	e->ext[e->next].t = t;
	e->ext[e->next].off = off;
	e->next++;
	tp->has_data_location = 1;
	tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	tp->n_external_data = 3 + (size_t)t->n_ext_extra;
	tp->external_data = alloc(e, tp->n_external_data * sizeof *tp->external_data);
	tp->external_data[0] = kv(e, "location", e->location);
	tp->external_data[1] = kv(e, "offset", arena_printf(e->a, "%" PRIu64, off));
	tp->external_data[2] = kv(e, "length", arena_printf(e->a, "%zu", t->nbytes));
	for (int i = 0; i < t->n_ext_extra; i++)
		tp->external_data[3 + i] = kv(e, t->ext_extra[i].key, t->ext_extra[i].value);
}

/* Raw layout → the typed field onnx.proto assigns to the dtype. */
static void
set_typed(Exp *e, Onnx__TensorProto *tp, const Tensor *t, size_t numel)
{
	const uint8_t *s = t->data;
	size_t nb = t->nbytes;

	if (t->dtype == DT_STRING) {
		tp->n_string_data = numel;
		tp->string_data = alloc(e, numel * sizeof *tp->string_data);
		for (size_t i = 0; i < numel; i++)
			tp->string_data[i] = bin(t->strs[i]);
		return;
	}
	if (nb == 0)
		return;
	switch (t->dtype) {
	case DT_FLOAT: case DT_COMPLEX64:
		tp->n_float_data = nb / 4;
		tp->float_data = alloc(e, nb);
		memcpy(tp->float_data, s, nb);
		return;
	case DT_DOUBLE: case DT_COMPLEX128:
		tp->n_double_data = nb / 8;
		tp->double_data = alloc(e, nb);
		memcpy(tp->double_data, s, nb);
		return;
	case DT_INT64:
		tp->n_int64_data = numel;
		tp->int64_data = alloc(e, nb);
		memcpy(tp->int64_data, s, nb);
		return;
	case DT_UINT64:
		tp->n_uint64_data = numel;
		tp->uint64_data = alloc(e, nb);
		memcpy(tp->uint64_data, s, nb);
		return;
	case DT_UINT32:
		tp->n_uint64_data = numel;
		tp->uint64_data = alloc(e, numel * 8);
		for (size_t i = 0; i < numel; i++) {
			uint32_t v;
			memcpy(&v, s + 4 * i, 4);
			tp->uint64_data[i] = v;
		}
		return;
	case DT_INT32:
		tp->n_int32_data = numel;
		tp->int32_data = alloc(e, nb);
		memcpy(tp->int32_data, s, nb);
		return;
	default:
		break;
	}
	/* narrow types: one int32 per element (4-bit: per packed byte);
	 * signed types sign-extend, the rest zero-extend (bit patterns) */
	int w = dtype_bits(t->dtype);
	size_t n = w == 4 ? nb : numel;
	tp->n_int32_data = n;
	tp->int32_data = alloc(e, n * sizeof(int32_t));
	for (size_t i = 0; i < n; i++) {
		int32_t v;
		if (w == 16) {
			uint16_t h;
			memcpy(&h, s + 2 * i, 2);
			v = t->dtype == DT_INT16 ? (int16_t)h : h;
		} else
			v = t->dtype == DT_INT8 ? (int8_t)s[i] : s[i];
		tp->int32_data[i] = v;
	}
}

static Onnx__TensorProto *
build_tensor(Exp *e, const Tensor *t, const char *name)
{
	Onnx__TensorProto *tp = NEW(e, Onnx__TensorProto, onnx__tensor_proto__init);
	int64_t numel = tensor_numel(t);

	tp->name = opt(name);
	tp->n_dims = (size_t)t->ndim;
	tp->dims = t->dims;
	tp->has_data_type = 1;
	tp->data_type = t->dtype;
	tp->doc_string = opt(t->doc);
	if (t->has_segment) {
		Onnx__TensorProto__Segment *sg =
			NEW(e, Onnx__TensorProto__Segment, onnx__tensor_proto__segment__init);
		sg->has_begin = sg->has_end = 1;
		sg->begin = t->seg_begin;
		sg->end = t->seg_end;
		tp->segment = sg;
	}
	if (!dtype_valid(t->dtype) || numel < 0) {
		fail(e, "tensor '%s': bad dtype or shape", name);
		return tp;
	}
	if (t->dtype == DT_STRING) {
		if (numel && !t->strs)
			fail(e, "tensor '%s': string tensor without strings", name);
		else
			set_typed(e, tp, t, (size_t)numel);
		return tp;
	}
	if (t->nbytes != dtype_nbytes(t->dtype, numel) || (t->nbytes && !t->data)) {
		fail(e, "tensor '%s': holds %zu bytes, its shape needs %zu", name, t->nbytes,
		     dtype_nbytes(t->dtype, numel));
		return tp;
	}
	if (goes_external(e, t))
		set_external(e, tp, t);
	else if (t->storage == TS_TYPED)
		set_typed(e, tp, t, (size_t)numel);
	else {
		tp->has_raw_data = 1;
		tp->raw_data.len = t->nbytes;
		tp->raw_data.data = (uint8_t *)t->data;
	}
	return tp;
}

static Onnx__SparseTensorProto *
build_sparse(Exp *e, const SparseTensor *s)
{
	Onnx__SparseTensorProto *sp = NEW(e, Onnx__SparseTensorProto, onnx__sparse_tensor_proto__init);

	sp->values = build_tensor(e, s->values, s->values->name);
	sp->indices = build_tensor(e, s->indices, s->indices->name);
	sp->n_dims = (size_t)s->ndim;
	sp->dims = s->dims;
	return sp;
}

/* ---------------------------------------------------------------- graphs */

static Onnx__GraphProto *build_graph(Exp *e, const Graph *g);

static void
attr_lists(Exp *e, Onnx__AttributeProto *ap, const Attr *at)
{
	size_t n = at->n > 0 ? (size_t)at->n : 0;

	switch (at->type) {
	case AT_FLOATS:
		ap->n_floats = n;
		ap->floats = at->floats;
		break;
	case AT_INTS:
		ap->n_ints = n;
		ap->ints = at->ints;
		break;
	case AT_STRINGS:
		ap->n_strings = n;
		ap->strings = alloc(e, n * sizeof *ap->strings);
		for (size_t i = 0; i < n; i++)
			ap->strings[i] = bin(at->strings[i]);
		break;
	case AT_TENSORS:
		ap->n_tensors = n;
		ap->tensors = alloc(e, n * sizeof *ap->tensors);
		for (size_t i = 0; i < n; i++)
			ap->tensors[i] = build_tensor(e, at->tensors[i], at->tensors[i]->name);
		break;
	case AT_GRAPHS:
		ap->n_graphs = n;
		ap->graphs = alloc(e, n * sizeof *ap->graphs);
		for (size_t i = 0; i < n; i++)
			ap->graphs[i] = build_graph(e, at->graphs[i]);
		break;
	case AT_SPARSE_TENSORS:
		ap->n_sparse_tensors = n;
		ap->sparse_tensors = alloc(e, n * sizeof *ap->sparse_tensors);
		for (size_t i = 0; i < n; i++)
			ap->sparse_tensors[i] = build_sparse(e, at->sparse[i]);
		break;
	case AT_TYPE_PROTOS:
		ap->n_type_protos = n;
		ap->type_protos = alloc(e, n * sizeof *ap->type_protos);
		for (size_t i = 0; i < n; i++)
			ap->type_protos[i] = build_type(e, at->types[i]);
		break;
	}
}

static Onnx__AttributeProto *
build_attr(Exp *e, const Node *n, const Attr *at)
{
	Onnx__AttributeProto *ap = NEW(e, Onnx__AttributeProto, onnx__attribute_proto__init);

	ap->name = (char *)at->name;
	ap->ref_attr_name = (char *)at->ref_attr_name;
	ap->doc_string = opt(at->doc);
	ap->has_type = 1;
	ap->type = (Onnx__AttributeProto__AttributeType)at->type;
	if (at->ref_attr_name)
		return ap;
	switch (at->type) {
	case AT_FLOAT: ap->has_f = 1; ap->f = at->f; break;
	case AT_INT: ap->has_i = 1; ap->i = at->i; break;
	case AT_STRING: ap->has_s = 1; ap->s = bin(at->s); break;
	case AT_TENSOR:
		if (at->t)
			ap->t = build_tensor(e, at->t, at->t->name);
		break;
	case AT_GRAPH:
		if (at->g)
			ap->g = build_graph(e, at->g);
		break;
	case AT_SPARSE_TENSOR:
		if (at->sp)
			ap->sparse_tensor = build_sparse(e, at->sp);
		break;
	case AT_TYPE_PROTO:
		if (at->tp)
			ap->tp = build_type(e, at->tp);
		break;
	default:
		attr_lists(e, ap, at);
		break;
	}
	if ((at->type == AT_TENSOR && !at->t) || (at->type == AT_GRAPH && !at->g) ||
	    (at->type == AT_SPARSE_TENSOR && !at->sp) || (at->type == AT_TYPE_PROTO && !at->tp))
		fail(e, "node '%s': attribute '%s' has no value", *n->name ? n->name : n->op_type,
		     at->name);
	return ap;
}

static Onnx__NodeProto *
build_node(Exp *e, const Node *n)
{
	Onnx__NodeProto *np = NEW(e, Onnx__NodeProto, onnx__node_proto__init);

	np->n_input = (size_t)n->ninputs;
	np->input = alloc(e, np->n_input * sizeof *np->input);
	for (int i = 0; i < n->ninputs; i++)
		np->input[i] = (char *)(n->inputs[i] ? n->inputs[i]->name : "");
	np->n_output = (size_t)n->noutputs;
	np->output = alloc(e, np->n_output * sizeof *np->output);
	for (int i = 0; i < n->noutputs; i++)
		np->output[i] = (char *)(n->outputs[i] ? n->outputs[i]->name : "");
	np->name = opt(n->name);
	np->op_type = (char *)n->op_type;
	np->domain = opt(n->domain);
	np->doc_string = opt(n->doc);
	np->n_attribute = (size_t)n->nattrs;
	np->attribute = alloc(e, np->n_attribute * sizeof *np->attribute);
	for (int i = 0; i < n->nattrs; i++)
		np->attribute[i] = build_attr(e, n, &n->attrs[i]);
	return np;
}

/* Node outputs worth a value_info entry, in node order. */
static bool
wants_value_info(const Value *v)
{
	return v && !v->is_input && !v->is_output && !v->init &&
	       (v->in_value_info || v->type.kind != TY_NONE);
}

static Onnx__GraphProto *
build_graph(Exp *e, const Graph *g)
{
	Onnx__GraphProto *gp = NEW(e, Onnx__GraphProto, onnx__graph_proto__init);
	size_t k = 0, nvi = 0;

	gp->name = opt(g->name);
	gp->doc_string = opt(g->doc);
	gp->n_node = (size_t)g->nnodes;
	gp->node = alloc(e, gp->n_node * sizeof *gp->node);
	FOR_NODES(g, n) {
		WL_ASSERT(k < gp->n_node);
		gp->node[k++] = build_node(e, n);
		for (int i = 0; i < n->noutputs; i++)
			nvi += wants_value_info(n->outputs[i]);
	}
	gp->n_initializer = (size_t)g->ninits;
	gp->initializer = alloc(e, gp->n_initializer * sizeof *gp->initializer);
	for (int i = 0; i < g->ninits; i++)
		gp->initializer[i] = build_tensor(e, g->inits[i]->init, g->inits[i]->name);
	gp->n_sparse_initializer = (size_t)g->nsparse;
	gp->sparse_initializer = alloc(e, gp->n_sparse_initializer * sizeof *gp->sparse_initializer);
	for (int i = 0; i < g->nsparse; i++)
		gp->sparse_initializer[i] = build_sparse(e, g->sparse_inits[i]);
	gp->n_input = (size_t)g->ninputs;
	gp->input = alloc(e, gp->n_input * sizeof *gp->input);
	for (int i = 0; i < g->ninputs; i++)
		gp->input[i] = build_vi(e, g->inputs[i]);
	gp->n_output = (size_t)g->noutputs;
	gp->output = alloc(e, gp->n_output * sizeof *gp->output);
	for (int i = 0; i < g->noutputs; i++)
		gp->output[i] = build_vi(e, g->outputs[i]);
	gp->n_value_info = nvi;
	gp->value_info = alloc(e, nvi * sizeof *gp->value_info);
	k = 0;
	FOR_NODES(g, n)
		for (int i = 0; i < n->noutputs; i++)
			if (wants_value_info(n->outputs[i]))
				gp->value_info[k++] = build_vi(e, n->outputs[i]);
	return gp;
}

static Onnx__OperatorSetIdProto **
build_opsets(Exp *e, const Opset *os, int n)
{
	Onnx__OperatorSetIdProto **v = alloc(e, (size_t)n * sizeof *v);

	for (int i = 0; i < n; i++) {
		v[i] = NEW(e, Onnx__OperatorSetIdProto, onnx__operator_set_id_proto__init);
		v[i]->domain = (char *)(os[i].domain ? os[i].domain : "");
		v[i]->has_version = 1;
		v[i]->version = os[i].version;
	}
	return v;
}

static Onnx__FunctionProto *
build_function(Exp *e, const Function *f)
{
	Onnx__FunctionProto *fp = NEW(e, Onnx__FunctionProto, onnx__function_proto__init);
	const Graph *g = f->body;
	size_t k = 0;

	fp->name = (char *)f->name;
	fp->domain = opt(f->domain);
	fp->doc_string = opt(f->doc);
	fp->n_input = (size_t)g->ninputs;
	fp->input = alloc(e, fp->n_input * sizeof *fp->input);
	for (int i = 0; i < g->ninputs; i++)
		fp->input[i] = (char *)g->inputs[i]->name;
	fp->n_output = (size_t)g->noutputs;
	fp->output = alloc(e, fp->n_output * sizeof *fp->output);
	for (int i = 0; i < g->noutputs; i++)
		fp->output[i] = (char *)g->outputs[i]->name;
	fp->n_attribute = (size_t)f->nattr_names;
	fp->attribute = (char **)f->attr_names;
	fp->n_node = (size_t)g->nnodes;
	fp->node = alloc(e, fp->n_node * sizeof *fp->node);
	FOR_NODES(g, n)
		fp->node[k++] = build_node(e, n);
	fp->n_opset_import = (size_t)f->nopsets;
	fp->opset_import = build_opsets(e, f->opsets, f->nopsets);
	return fp;
}

static Onnx__ModelProto *
build_model(Exp *e)
{
	const Module *m = e->m;
	Onnx__ModelProto *mp = NEW(e, Onnx__ModelProto, onnx__model_proto__init);

	e->next = 0;
	e->data_end = 0;
	mp->has_ir_version = m->ir_version != 0;
	mp->ir_version = m->ir_version;
	mp->n_opset_import = (size_t)m->nopsets;
	mp->opset_import = build_opsets(e, m->opsets, m->nopsets);
	mp->producer_name = opt(m->producer_name);
	mp->producer_version = opt(m->producer_version);
	mp->domain = opt(m->domain);
	mp->has_model_version = m->model_version != 0;
	mp->model_version = m->model_version;
	mp->doc_string = opt(m->doc);
	if (!m->graph)
		fail(e, "module has no graph");
	else
		mp->graph = build_graph(e, m->graph);
	mp->n_metadata_props = (size_t)m->nmetadata;
	mp->metadata_props = alloc(e, mp->n_metadata_props * sizeof *mp->metadata_props);
	for (int i = 0; i < m->nmetadata; i++)
		mp->metadata_props[i] = kv(e, m->metadata[i].key, m->metadata[i].value);
	mp->n_functions = (size_t)m->nfuncs;
	mp->functions = alloc(e, mp->n_functions * sizeof *mp->functions);
	for (int i = 0; i < m->nfuncs; i++)
		mp->functions[i] = build_function(e, m->funcs[i]);
	return mp;
}

/* ---------------------------------------------------------------- writing */

typedef struct FileBuf {
	ProtobufCBuffer base;
	FILE *f;
	size_t n;
	int err;
} FileBuf;

static void
file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	FileBuf *fb = (FileBuf *)b;

	if (fb->err || len == 0)
		return;
	errno = 0;
	if (fwrite(data, 1, len, fb->f) != len)
		fb->err = errno ? errno : EIO;
	fb->n += len;
}

static int
write_data_file(Exp *e, AtomicFile *df)
{
	static const uint8_t zeros[EXT_ALIGN];
	uint64_t pos = 0;

	for (size_t i = 0; i < e->next; i++) {
		const ExtRec *r = &e->ext[i];
		size_t pad = (size_t)(r->off - pos);
		errno = 0;
		if ((pad && fwrite(zeros, 1, pad, df->f) != pad) ||
		    (r->t->nbytes && fwrite(r->t->data, 1, r->t->nbytes, df->f) != r->t->nbytes)) {
			fail(e, "cannot write external data: %s", strerror(errno ? errno : EIO));
			return WL_ERR;
		}
		pos = r->off + r->t->nbytes;
	}
	return WL_OK;
}

static int
write_model(Exp *e, const Onnx__ModelProto *mp, size_t size, AtomicFile *af)
{
	FileBuf fb = {{file_append}, af->f, 0, 0};

	protobuf_c_message_pack_to_buffer(&mp->base, &fb.base);
	if (fb.err || fb.n != size) {
		fail(e, "write failed: %s", strerror(fb.err ? fb.err : EIO));
		return WL_ERR;
	}
	return WL_OK;
}

/* Builds the message, choosing external storage when the 2 GiB limit asks
 * for it. Returns NULL on error. */
static Onnx__ModelProto *
build_sized(Exp *e, size_t *size)
{
	Onnx__ModelProto *mp = build_model(e);

	if (e->err)
		return NULL;
	*size = protobuf_c_message_get_packed_size(&mp->base);
	if (*size > e->limit && e->policy == EXT_KEEP) {
		e->policy = EXT_ALL;
		mp = build_model(e);
		if (e->err)
			return NULL;
		*size = protobuf_c_message_get_packed_size(&mp->base);
	}
	if (*size > e->limit) {
		fail(e, "model needs %zu bytes, over the protobuf limit of %zu%s", *size, e->limit,
		     e->policy == EXT_NONE ? " (export to a file to use external data)" : "");
		return NULL;
	}
	return mp;
}

static const char *
base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

int
onnx_export_file(Module *m, const char *path, const ExportOptions *opt, Diag *d)
{
	Exp e = {m, arena_new(), d, path, EXT_KEEP, 1024, PROTO_LIMIT, NULL, 0, NULL, 0, 0, 0};
	AtomicFile af = {0}, df = {0};
	bool have_af = false, have_df = false;
	size_t size = 0;
	int rc = WL_ERR;

	if (opt && opt->external_threshold)
		e.threshold = opt->external_threshold;
	if (opt && opt->all_external)
		e.policy = EXT_ALL;
	if (opt && opt->size_limit && opt->size_limit < PROTO_LIMIT)
		e.limit = opt->size_limit;
	char *data_path = arena_printf(e.a, "%s.data", path);
	e.location = arena_printf(e.a, "%s.data", base_name(path));
	Onnx__ModelProto *mp = build_sized(&e, &size);
	if (!mp)
		goto out;
	if (e.next) {
		if (atomic_open(&df, data_path, d) != WL_OK)
			goto out;
		have_df = true;
		if (write_data_file(&e, &df) != WL_OK)
			goto out;
	}
	if (atomic_open(&af, path, d) != WL_OK)
		goto out;
	have_af = true;
	if (write_model(&e, mp, size, &af) != WL_OK)
		goto out;
	if (have_df) {
		have_df = false;
		if (atomic_commit(&df, d) != WL_OK)
			goto out;
	}
	have_af = false;
	if (atomic_commit(&af, d) != WL_OK) {
		if (e.next)
			unlink(data_path);
		goto out;
	}
	rc = WL_OK;
out:
	if (have_df)
		atomic_abort(&df);
	if (have_af)
		atomic_abort(&af);
	free(e.ext);
	arena_free(e.a);
	return rc;
}

int
onnx_export_buffer(Module *m, void **buf, size_t *len, Diag *d)
{
	Exp e = {m, arena_new(), d, m->path, EXT_NONE, 0, PROTO_LIMIT, NULL, 0, NULL, 0, 0, 0};
	size_t size = 0;
	int rc = WL_ERR;

	*buf = NULL;
	*len = 0;
	Onnx__ModelProto *mp = build_sized(&e, &size);
	if (mp) {
		uint8_t *p = malloc(size ? size : 1);
		if (!p)
			wl_die(__FILE__, __LINE__, "out of memory (%zu bytes)", size);
		size_t n = protobuf_c_message_pack(&mp->base, p);
		WL_ASSERT(n == size);
		*buf = p;
		*len = size;
		rc = WL_OK;
	}
	free(e.ext);
	arena_free(e.a);
	return rc;
}
