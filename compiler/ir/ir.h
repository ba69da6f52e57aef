/* ir.h — the wlower intermediate representation.
 *
 * One header for the IR, QBE style: a section per .c file in compiler/ir/.
 *
 *   arena.c   bump allocator; one arena per Module, freed at once
 *   diag.c    the two error tiers: WL_ASSERT (internal, aborts with file:line)
 *             and Diag (bad input: a one-line message naming file, node, tensor)
 *   dtype.c   ONNX element types: names as in the textual syntax, sizes
 *   ops.c     the op table (ops.def, an X-macro): enum Op, names, domains, arity
 *   ir.c      construction and mutation: values, nodes, use lists, initializers
 *   verify.c  the verifier: SSA, types, dangling uses, topological order
 *
 * Model
 *   A Module owns an Arena, the ModelProto-level fields, and the main Graph.
 *   A Graph is a doubly linked list of Nodes in topological order plus its
 *   inputs, outputs and initializers. Subgraphs (If/Loop/Scan bodies) are
 *   Graphs held by GRAPH attributes; their `parent` points to the graph that
 *   contains the node, and names resolve outward (lexical scoping as in ONNX).
 *   Every tensor name in a graph is one Value (SSA: at most one producer).
 *   A Value is produced by a node output, or is a graph input, or an
 *   initializer (Value.init != NULL), or is an outer-scope value used by a
 *   subgraph. Value.users lists every (node, input slot) reading it, including
 *   nodes inside subgraphs.
 *   Optional inputs that are absent are NULL in Node.inputs; absent optional
 *   outputs are NULL in Node.outputs (ONNX: the empty name "").
 *
 * Weights
 *   Tensor.data points at the bytes of the tensor in ONNX raw_data layout
 *   (little endian; int4/uint4 packed two per byte, low nibble first; bool one
 *   byte each). For tensors read from a file it points into an mmap owned by
 *   the Module (the model file itself or an external-data file): weights are
 *   never copied on import. STRING tensors keep an array of (ptr, len) instead.
 */
#ifndef WLOWER_IR_H
#define WLOWER_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- diag.c */

/* Internal invariant: abort with file:line. Never for bad input. */
#define WL_ASSERT(c) \
	((c) ? (void)0 : wl_die(__FILE__, __LINE__, "assertion failed: %s", #c))
#define WL_UNREACHABLE() wl_die(__FILE__, __LINE__, "unreachable")
_Noreturn void wl_die(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* malloc, calloc and strdup that die on out of memory (a size 0 gets 1 byte). */
void *wl_xmalloc(size_t n);
void *wl_xcalloc(size_t n, size_t size);
char *wl_xstrdup(const char *s);

/* Bad input: functions return WL_ERR (-1) and fill a Diag; only the driver
 * prints and exits. Messages are one line: "FILE: node 'N': tensor 'T': what". */
enum { WL_OK = 0, WL_ERR = -1 };
typedef struct Diag {
	char msg[1024];
	int set;
} Diag;
/* Sets d->msg (if not already set) and returns WL_ERR. d may be NULL. */
int diag_fail(Diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int diag_vfail(Diag *d, const char *fmt, va_list ap);
/* Prefix an existing message ("FILE: " + msg); keeps it one line. */
void diag_prefix(Diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The one message of an index out of range (Gather, GatherElements, the
 * position_ids of GroupQueryAttention), the same on every target (the
 * reference executor, the host runtime; targets/chimera/ccl/ccl.hpp
 * ccl::index_fail prints the same text):
 *   "input 'ids' of node 'emb' (Gather): index 1000 at [0,3] out of range [-1000, 1000)"
 * flags: INDEX_GRAPH_INPUT ("input", else "tensor"), INDEX_NO_WRAP (valid
 * range [0, size), else [-size, size)); pos is the flat (row-major) position
 * in the indices tensor of dims[rank]. */
enum { INDEX_GRAPH_INPUT = 1, INDEX_NO_WRAP = 2 };
int diag_index_range(Diag *d, const char *tensor, int flags, const char *node, const char *op, int rank,
                     const int64_t *dims, int64_t pos, int64_t value, int64_t size);

/* ---------------------------------------------------------------- arena.c */

typedef struct Arena Arena;
Arena *arena_new(void);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t n);          /* zeroed, 16-byte aligned */
void *arena_realloc(Arena *a, void *p, size_t old, size_t n); /* copy-grow */
char *arena_strdup(Arena *a, const char *s);    /* NULL stays NULL */
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t arena_bytes(const Arena *a);             /* bytes handed out */

/* Growable array of pointers kept in an arena. */
#define VEC_PUSH(arena, arr, n, cap, x)                                        \
	do {                                                                   \
		if ((n) == (cap)) {                                            \
			size_t nc_ = (cap) ? 2 * (size_t)(cap) : 4;            \
			(arr) = arena_realloc((arena), (arr),                  \
			                      (size_t)(cap) * sizeof *(arr),   \
			                      nc_ * sizeof *(arr));            \
			(cap) = nc_;                                           \
		}                                                              \
		(arr)[(n)++] = (x);                                            \
	} while (0)

/* ---------------------------------------------------------------- dtype.c */

/* ONNX TensorProto.DataType numbering (onnx.proto), including the newer
 * float8 and 4-bit types that Debian's onnx.proto does not list yet. */
typedef enum DType {
	DT_UNDEFINED = 0,
	DT_FLOAT = 1, DT_UINT8 = 2, DT_INT8 = 3, DT_UINT16 = 4, DT_INT16 = 5,
	DT_INT32 = 6, DT_INT64 = 7, DT_STRING = 8, DT_BOOL = 9, DT_FLOAT16 = 10,
	DT_DOUBLE = 11, DT_UINT32 = 12, DT_UINT64 = 13, DT_COMPLEX64 = 14,
	DT_COMPLEX128 = 15, DT_BFLOAT16 = 16,
	DT_FLOAT8E4M3FN = 17, DT_FLOAT8E4M3FNUZ = 18, DT_FLOAT8E5M2 = 19,
	DT_FLOAT8E5M2FNUZ = 20, DT_UINT4 = 21, DT_INT4 = 22,
	DT_COUNT_
} DType;

/* A float's bits and back (memcpy: no aliasing). */
static inline uint32_t f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

const char *dtype_name(int dt);          /* textual syntax: "float", "int64", ...; NULL if unknown */
int dtype_from_name(const char *s, size_t n); /* DT_UNDEFINED if unknown */
int dtype_bits(int dt);                  /* 32, 4 for int4, 0 for string/undefined */
bool dtype_valid(int dt);                /* 1..22 */
/* Bytes for `count` elements in raw layout (4-bit types round up). */
size_t dtype_nbytes(int dt, int64_t count);
/* binary32 → bfloat16 bits, round to nearest even (a NaN stays a quiet NaN) */
uint16_t dtype_f32_to_bf16(float f);

/* ---------------------------------------------------------------- types */

enum { DIM_UNKNOWN = 0, DIM_VALUE = 1, DIM_PARAM = 2 };
typedef struct Dim {
	int kind;              /* DIM_* */
	int64_t value;         /* DIM_VALUE */
	const char *param;     /* DIM_PARAM: symbolic name ("N", "batch") */
	const char *denotation;
} Dim;

/* TypeProto. A Value whose type is not known has kind TY_NONE. */
enum { TY_NONE = 0, TY_TENSOR, TY_SPARSE_TENSOR, TY_SEQUENCE, TY_MAP, TY_OPTIONAL };
typedef struct Type {
	int kind;              /* TY_* */
	int elem;              /* DType, for tensors and sparse tensors */
	bool has_shape;        /* false: rank unknown */
	int rank;
	Dim *dims;             /* rank entries */
	int map_key;           /* DType of a map's key */
	struct Type *inner;    /* element of sequence/optional, value of map */
	const char *denotation;
} Type;

/* ---------------------------------------------------------------- tensors */

enum { TS_RAW = 0, TS_TYPED = 1, TS_EXTERNAL = 2 };  /* how the file stored it */
typedef struct StrRef { const char *ptr; size_t len; } StrRef;
typedef struct KV { const char *key, *value; } KV;

typedef struct Tensor {
	const char *name;
	int dtype;
	int ndim;
	int64_t *dims;
	const void *data;      /* raw layout, see top; NULL for strings */
	size_t nbytes;
	StrRef *strs;          /* DT_STRING: numel entries */
	int storage;           /* TS_*: how it was stored in the source (kept on export) */
	const char *doc;
	/* external data, as found in the file (TS_EXTERNAL) */
	const char *ext_location;
	int64_t ext_offset, ext_length;
	KV *ext_extra; int n_ext_extra;  /* other external_data keys (checksum...) */
	bool has_segment; int64_t seg_begin, seg_end;
} Tensor;
/* Element counts are multiplied through wl_mul_i64 only: false (*out
 * unchanged) when a * b overflows int64. */
static inline bool wl_mul_i64(int64_t a, int64_t b, int64_t *out)
{
	int64_t r;
	if (__builtin_mul_overflow(a, b, &r))
		return false;
	*out = r;
	return true;
}
int64_t tensor_numel(const Tensor *t);           /* -1 if the count overflows int64 */

typedef struct SparseTensor {
	Tensor *values, *indices;
	int ndim;
	int64_t *dims;
} SparseTensor;

/* ---------------------------------------------------------------- ops.c */

/* The op table: ops.def rows are OP(Enum, "Name", "domain", min_in, max_in,
 * min_out, max_out); -1 = variadic. Unknown ops are OP_UNKNOWN and keep
 * Node.op_type/domain verbatim. */
typedef enum Op {
	OP_UNKNOWN = 0,
#define OP(e, name, dom, mini, maxi, mino, maxo) OP_##e,
#include "ops.def"
#undef OP
	OP_COUNT_
} Op;
typedef struct OpInfo {
	const char *name, *domain;   /* domain "" is ai.onnx */
	int min_in, max_in, min_out, max_out;
} OpInfo;
extern const OpInfo op_info[OP_COUNT_];
/* Domains: NULL, "" and "ai.onnx" all mean the default domain (ai.onnx);
 * every comparison of domains goes through these two. */
bool domain_is_default(const char *domain);
bool domain_eq(const char *a, const char *b);
/* The op of (domain, op_type), OP_UNKNOWN if ops.def has no such row. */
Op op_lookup(const char *domain, const char *op_type);

/* ---------------------------------------------------------------- IR */

typedef struct Graph Graph;
typedef struct Node Node;
typedef struct Value Value;
typedef struct Module Module;

typedef struct Use { Node *node; int slot; } Use;

struct Value {
	const char *name;
	Graph *graph;          /* graph whose scope declares it */
	Type type;
	const char *doc;
	Node *producer;        /* NULL for inputs, initializers, outer values */
	int producer_slot;
	Use *users; int nusers, cap_users;
	Tensor *init;          /* initializer data, or NULL */
	bool is_input, is_output;
	bool in_value_info;    /* had (or should get) a value_info entry */
	/* numerics (later passes) */
	bool has_range; double rmin, rmax;
	int frac_bits;         /* FRAC_UNSET, 0..31 = FixedPoint32<F>, FRAC_FP16, FRAC_F32 */
	int id;                /* dense index within module, for side tables */
};

/* Value.frac_bits (set by the numerics passes, read by the chimera target):
 * 0..31 the value is FixedPoint32<F> (v * 2^F in int32); FRAC_FP16 it is
 * stored as binary16; FRAC_F32 it stays float32; FRAC_UNSET not assigned
 * (non-float values, or before numerics). */
enum { FRAC_UNSET = -1, FRAC_FP16 = 64, FRAC_F32 = 65 };

enum {
	AT_UNDEFINED = 0, AT_FLOAT = 1, AT_INT = 2, AT_STRING = 3, AT_TENSOR = 4,
	AT_GRAPH = 5, AT_FLOATS = 6, AT_INTS = 7, AT_STRINGS = 8, AT_TENSORS = 9,
	AT_GRAPHS = 10, AT_SPARSE_TENSOR = 11, AT_SPARSE_TENSORS = 12,
	AT_TYPE_PROTO = 13, AT_TYPE_PROTOS = 14
};
typedef struct Attr {
	const char *name;
	int type;              /* AT_* (AttributeProto.AttributeType numbering) */
	const char *ref_attr_name; /* in function bodies: refers to a caller attribute */
	const char *doc;
	float f; int64_t i; StrRef s; Tensor *t; Graph *g; SparseTensor *sp; Type *tp;
	int n;                 /* count for the list kinds */
	float *floats; int64_t *ints; StrRef *strings; Tensor **tensors;
	Graph **graphs; SparseTensor **sparse; Type **types;
} Attr;

struct Node {
	const char *name;      /* may be "" */
	Op op;
	const char *op_type;   /* verbatim from the model */
	const char *domain;    /* verbatim; "" for ai.onnx */
	const char *doc;
	const char *overload;  /* reserved (onnx >= 1.16) */
	Value **inputs; int ninputs, cap_inputs;   /* NULL entry = absent optional */
	Value **outputs; int noutputs, cap_outputs;
	Attr *attrs; int nattrs, cap_attrs;
	Node *prev, *next;
	Graph *graph;
};

struct Graph {
	Module *mod;
	Graph *parent;         /* enclosing graph for subgraphs; NULL for main */
	Node *owner;           /* node holding the GRAPH attribute; NULL for main */
	const char *name;
	const char *doc;
	Node *first, *last;
	int nnodes;
	Value **inputs; int ninputs, cap_inputs;
	Value **outputs; int noutputs, cap_outputs;
	Value **values; int nvalues, cap_values;     /* every value declared in this scope, in creation order */
	Value **inits; int ninits, cap_inits;        /* initializers, in file order */
	SparseTensor **sparse_inits; int nsparse, cap_sparse;
	struct NameMap *names;                        /* name -> Value* (this scope only) */
};

typedef struct Opset { const char *domain; int64_t version; } Opset;

/* A model-local function (FunctionProto). The body is a Graph whose inputs and
 * outputs are untyped values; attribute names are kept as strings. */
typedef struct Function {
	const char *name, *domain, *doc;
	Graph *body;
	const char **attr_names; int nattr_names;
	Opset *opsets; int nopsets;
} Function;

typedef struct Mapping { void *addr; size_t len; } Mapping;

struct Module {
	Arena *arena;
	const char *path;      /* file it was read from (for diagnostics) */
	int64_t ir_version;
	Opset *opsets; int nopsets, cap_opsets;
	const char *producer_name, *producer_version, *domain, *doc;
	int64_t model_version;
	KV *metadata; int nmetadata, cap_metadata;
	Graph *graph;
	Function **funcs; int nfuncs, cap_funcs;
	Mapping *maps; int nmaps, cap_maps;          /* munmap'ed by module_free */
	int next_value_id;
	bool debug_verify;                           /* run the verifier after each pass */
};

/* ir.c: construction. All memory comes from mod->arena. */
Module *module_new(const char *path);
void module_free(Module *m);                     /* frees arena, unmaps */
void module_add_mapping(Module *m, void *addr, size_t len);
void module_set_opset(Module *m, const char *domain, int64_t version); /* add or raise */
int64_t module_opset(const Module *m, const char *domain);  /* 0 if not imported */
/* FNV-1a of a NUL-terminated string: the hash of the name tables (ir.c, tranges). */
uint64_t wl_hash_str(const char *s);

Graph *graph_new(Module *m, Graph *parent, Node *owner, const char *name);
/* Lookup in this scope, then outward. */
Value *graph_find(Graph *g, const char *name);
Value *graph_find_local(Graph *g, const char *name);
/* Get or create a value named `name` in g's scope (only this scope). */
Value *graph_value(Graph *g, const char *name);
/* A fresh value with a unique name derived from `hint` ("hint", "hint_1", ...). */
Value *graph_new_value(Graph *g, const char *hint);
/* Renames v within its scope (and its initializer); false, nothing changed,
 * if the scope already has a value of that name. */
bool value_rename(Value *v, const char *name);
void graph_add_input(Graph *g, Value *v);
void graph_add_output(Graph *g, Value *v);
void graph_remove_output(Graph *g, int idx);
void graph_remove_input(Graph *g, int idx);   /* the value stays, no longer an input */
/* Makes v an initializer holding t (t->name is set to v->name). */
void graph_set_init(Graph *g, Value *v, Tensor *t);
void graph_remove_init(Graph *g, Value *v);

/* Nodes. op_type/domain are copied; op is looked up in the op table. */
Node *node_new(Graph *g, const char *op_type, const char *domain, const char *name);
/* The op as messages name it: "Softmax", "com.microsoft.GroupQueryAttention"
 * (op_type, after the domain unless that is the default one); into buf. */
const char *node_op_name(const Node *n, char *buf, size_t len);
void node_append(Graph *g, Node *n);             /* at the end */
void node_insert_before(Node *pos, Node *n);
void node_insert_after(Node *pos, Node *n);
void node_add_input(Node *n, Value *v);          /* v may be NULL (absent) */
void node_add_output(Node *n, Value *v);         /* v may be NULL; sets producer */
void node_set_input(Node *n, int slot, Value *v);/* keeps use lists right */
/* Unlinks n, drops its uses and clears producer of its outputs. */
void node_remove(Node *n);
/* Every use of `from` (in any graph) now reads `to`; graph outputs too. */
void value_replace_uses(Value *from, Value *to);
bool value_is_const(const Value *v);             /* has an initializer */

/* Attributes. */
Attr *node_attr(const Node *n, const char *name);             /* NULL if absent */
Attr *node_add_attr(Node *n, const char *name, int type);     /* replaces same name */
int64_t attr_int(const Node *n, const char *name, int64_t dflt);
float attr_float(const Node *n, const char *name, float dflt);
const char *attr_string(const Node *n, const char *name, const char *dflt); /* arena copy, NUL-terminated */
/* INTS attribute: returns count (or -1 if absent) and sets *out. */
int attr_ints(const Node *n, const char *name, const int64_t **out);

/* Tensors. */
Tensor *tensor_new(Arena *a, const char *name, int dtype, int ndim, const int64_t *dims);
/* Allocates zeroed data of the right size in the arena (owned, not mapped). */
void *tensor_alloc_data(Arena *a, Tensor *t);
Tensor *tensor_clone_meta(Arena *a, const Tensor *t);
/* Read element i as double / int64 (any numeric dtype). */
double tensor_get_f64(const Tensor *t, int64_t i);
int64_t tensor_get_i64(const Tensor *t, int64_t i);

/* Types. */
void type_set_tensor(Arena *a, Type *ty, int elem, int rank, const int64_t *dims); /* dims < 0: unknown */
Type type_copy(Arena *a, const Type *t);
bool type_equal(const Type *a, const Type *b);
bool type_shape_known(const Type *t);            /* tensor with every dim a value */
int64_t type_numel(const Type *t);               /* -1 if unknown or it overflows int64 */

/* Iteration helpers. */
#define FOR_NODES(g, n) for (Node *n = (g)->first; n; n = n->next)
#define FOR_NODES_SAFE(g, n, nx) for (Node *n = (g)->first, *nx = n ? n->next : NULL; n; n = nx, nx = n ? n->next : NULL)
/* The subgraphs of a node's attributes, in attribute order (an AT_GRAPH's g,
 * each of an AT_GRAPHS's graphs): the i-th, NULL past the last. FOR_SUBGRAPHS
 * declares Graph *sg for each in turn. */
Graph *node_subgraph(const Node *n, int i);
#define FOR_SUBGRAPHS(n, sg) \
	for (int sg##_i_ = 0, sg##_once_ = 1; sg##_once_; sg##_once_ = 0) \
		for (Graph *sg; (sg = node_subgraph((n), sg##_i_)) != NULL; sg##_i_++)

/* ---------------------------------------------------------------- verify.c */

/* Checks SSA (one producer per value, producer agrees with node outputs),
 * use lists (every input edge is a Use and vice versa), no dangling values
 * (every input is a graph input, initializer, produced earlier, or an outer
 * value), topological order, declared tensor types are well formed, and
 * op arity from the op table. Recurses into subgraphs. */
int ir_verify(Module *m, Diag *d);

#endif
