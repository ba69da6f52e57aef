/* ref_elementwise.c — elementwise ops with multidirectional broadcasting.
 *
 * One engine serves every op here: the output shape is the broadcast of the
 * inputs; dimensions of size 1 are dropped and adjacent dimensions merged
 * wherever every input is contiguous across them (so [1,1500,384] + [384]
 * becomes 1500 rows of 384 and a same-shape Add one run of 576000); the
 * rows are cut into chunks of at most CHUNK elements and handed to the
 * thread pool. A row function gets the output and input pointers of the
 * chunk plus each input's inner stride (1, or 0 when broadcast).
 *
 * float32 has vectorizable loops per op (inner strides specialized); other
 * dtypes go through double (float16, bfloat16, double) or int64 (integers),
 * one element at a time. float16 results are rounded once, to nearest even,
 * from the double result, which for +,-,*,/ and sqrt equals rounding the
 * exact result.
 */
#include "ref.h"

typedef uint16_t u16u __attribute__((aligned(1)));
typedef uint32_t u32u __attribute__((aligned(1)));

enum { CHUNK = 16384, MAXIN = 3 };

/* ---------------------------------------------------------------- engine */

typedef struct BIter {
	int nd;                         /* merged rank, >= 1 */
	int64_t dims[RT_MAX_DIMS];
	int n;                          /* inputs */
	int64_t str[MAXIN][RT_MAX_DIMS];
	int64_t rows, inner;
} BIter;

static void biter_init(BIter *it, int n, RTensor *const *ins, int ndim, const int64_t *odims)
{
	int64_t s[MAXIN][RT_MAX_DIMS];
	for (int k = 0; k < n; k++)
		broadcast_strides(ins[k], ndim, odims, s[k]);
	it->n = n;
	it->nd = 0;
	for (int i = 0; i < ndim; i++) {
		if (odims[i] == 1)
			continue;
		int j = it->nd;
		bool merge = j > 0;
		for (int k = 0; k < n && merge; k++)
			if (it->str[k][j - 1] != s[k][i] * odims[i])
				merge = false;
		if (merge) {
			it->dims[j - 1] *= odims[i];
			for (int k = 0; k < n; k++)
				it->str[k][j - 1] = s[k][i];
			continue;
		}
		it->dims[j] = odims[i];
		for (int k = 0; k < n; k++)
			it->str[k][j] = s[k][i];
		it->nd++;
	}
	if (it->nd == 0) {
		it->nd = 1;
		it->dims[0] = 1;
		for (int k = 0; k < n; k++)
			it->str[k][0] = 0;
	}
	it->inner = it->dims[it->nd - 1];
	it->rows = 1;
	for (int i = 0; i < it->nd - 1; i++)
		it->rows *= it->dims[i];
}

/* Element offsets of each input at the start of outer row `row`. */
static void biter_row(const BIter *it, int64_t row, int64_t *off)
{
	for (int k = 0; k < it->n; k++)
		off[k] = 0;
	for (int i = it->nd - 2; i >= 0; i--) {
		int64_t q = row % it->dims[i];
		row /= it->dims[i];
		for (int k = 0; k < it->n; k++)
			off[k] += q * it->str[k][i];
	}
}

typedef struct EwJob EwJob;
typedef void (*RowFn)(const EwJob *j, void *o, const void *const *in, const int64_t *is, int64_t n);

struct EwJob {
	BIter it;
	const void *in[MAXIN];
	int ies[MAXIN], idt[MAXIN];     /* element sizes and dtypes */
	void *out;
	int oes, odt;
	int op;
	double p0, p1;                  /* op parameters (alpha, beta...) */
	RowFn row;
	int64_t chunks_per_row;
};

static void ew_par(void *ctx, int64_t u0, int64_t u1, int tid)
{
	const EwJob *j = ctx;
	(void)tid;
	for (int64_t u = u0; u < u1; u++) {
		int64_t row = u / j->chunks_per_row, ch = u % j->chunks_per_row;
		int64_t b = ch * CHUNK, n = j->it.inner - b < CHUNK ? j->it.inner - b : CHUNK;
		int64_t off[MAXIN];
		biter_row(&j->it, row, off);
		const void *ip[MAXIN];
		int64_t is[MAXIN];
		for (int k = 0; k < j->it.n; k++) {
			is[k] = j->it.str[k][j->it.nd - 1];
			ip[k] = (const char *)j->in[k] + (off[k] + b * is[k]) * j->ies[k];
		}
		j->row(j, (char *)j->out + (row * j->it.inner + b) * j->oes, ip, is, n);
	}
}

/* Sets up and runs job j over output o for inputs ins[0..n). */
static void ew_run(const KCall *c, EwJob *j, int n, RTensor *const *ins, RTensor *o)
{
	biter_init(&j->it, n, ins, o->ndim, o->dims);
	for (int k = 0; k < n; k++) {
		j->in[k] = ins[k]->data;
		j->idt[k] = ins[k]->dtype;
		j->ies[k] = elem_size(ins[k]->dtype);
	}
	j->out = o->data;
	j->odt = o->dtype;
	j->oes = elem_size(o->dtype);
	if (rt_numel(o) == 0)
		return;
	j->chunks_per_row = (j->it.inner + CHUNK - 1) / CHUNK;
	int64_t units = j->it.rows * j->chunks_per_row;
	int64_t grain = (CHUNK / (j->it.inner < CHUNK ? j->it.inner : CHUNK)) + 1;
	parallel_for(rt_numel(o) >= 65536 ? c->pool : NULL, units, grain, ew_par, j);
}

/* ---------------------------------------------------------------- binary ops */

enum {
	B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MOD, B_FMOD, B_MAX, B_MIN,
	B_EQ, B_LT, B_GT, B_LE, B_GE, B_AND, B_OR, B_XOR, B_SHL, B_SHR, B_PRELU,
};

static bool is_cmp(int op)
{
	return op >= B_EQ && op <= B_XOR;
}

static double fmaxn(double a, double b)
{
	return (a != a || a > b) ? a : b;
}

static double fminn(double a, double b)
{
	return (a != a || a < b) ? a : b;
}

static double bin_f64(int op, double a, double b)
{
	switch (op) {
	case B_ADD: return a + b;
	case B_SUB: return a - b;
	case B_MUL: return a * b;
	case B_DIV: return a / b;
	case B_POW: return pow(a, b);
	case B_FMOD: case B_MOD: return fmod(a, b);
	case B_MAX: return fmaxn(a, b);
	case B_MIN: return fminn(a, b);
	case B_EQ: return a == b;
	case B_LT: return a < b;
	case B_GT: return a > b;
	case B_LE: return a <= b;
	case B_GE: return a >= b;
	case B_AND: return (a != 0) && (b != 0);
	case B_OR: return (a != 0) || (b != 0);
	case B_XOR: return (a != 0) != (b != 0);
	case B_PRELU: return a < 0 ? a * b : a;
	default: return 0;
	}
}

static int64_t bin_i64(int op, int64_t a, int64_t b, bool uns)
{
	uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
	switch (op) {
	case B_ADD: return (int64_t)(ua + ub);
	case B_SUB: return (int64_t)(ua - ub);
	case B_MUL: return (int64_t)(ua * ub);
	case B_DIV:
		if (b == 0)
			return 0;
		if (uns)
			return (int64_t)(ua / ub);
		if (a == INT64_MIN && b == -1)
			return INT64_MIN;
		return a / b;
	case B_MOD:                      /* sign of the divisor (Python) */
		if (b == 0)
			return 0;
		if (uns)
			return (int64_t)(ua % ub);
		if (b == -1)
			return 0;
		{
			int64_t r = a % b;
			if (r != 0 && ((r < 0) != (b < 0)))
				r += b;
			return r;
		}
	case B_FMOD:                     /* sign of the dividend (C) */
		if (b == 0)
			return 0;
		if (uns)
			return (int64_t)(ua % ub);
		if (b == -1)
			return 0;
		return a % b;
	case B_POW: {
		if (b < 0)
			return a == 1 ? 1 : (a == -1 ? (b & 1 ? -1 : 1) : 0);
		uint64_t r = 1, base = ua;
		for (uint64_t e = ub; e; e >>= 1) {
			if (e & 1)
				r *= base;
			base *= base;
		}
		return (int64_t)r;
	}
	case B_MAX: return uns ? (int64_t)(ua > ub ? ua : ub) : (a > b ? a : b);
	case B_MIN: return uns ? (int64_t)(ua < ub ? ua : ub) : (a < b ? a : b);
	case B_EQ: return a == b;
	case B_LT: return uns ? ua < ub : a < b;
	case B_GT: return uns ? ua > ub : a > b;
	case B_LE: return uns ? ua <= ub : a <= b;
	case B_GE: return uns ? ua >= ub : a >= b;
	case B_AND: return a && b;
	case B_OR: return a || b;
	case B_XOR: return (a != 0) != (b != 0);
	case B_SHL: return ub >= 64 ? 0 : (int64_t)(ua << ub);
	case B_SHR: return ub >= 64 ? 0 : (int64_t)(ua >> ub);
	case B_PRELU: return a < 0 ? (int64_t)(ua * ub) : a;
	default: return 0;
	}
}

/* float32 loops: the three broadcast patterns of a row */
#define F32_BIN(name, expr)                                                              \
	KCLONES static void name(float *o, const ufloat *a, const ufloat *b, int64_t sa, int64_t sb, int64_t n) \
	{                                                                                    \
		if (sa && sb)                                                                \
			for (int64_t i = 0; i < n; i++) { float x = a[i], y = b[i]; o[i] = (expr); } \
		else if (sa)                                                                 \
			for (int64_t i = 0; i < n; i++) { float x = a[i], y = b[0]; o[i] = (expr); } \
		else if (sb)                                                                 \
			for (int64_t i = 0; i < n; i++) { float x = a[0], y = b[i]; o[i] = (expr); } \
		else                                                                         \
			for (int64_t i = 0; i < n; i++) { float x = a[0], y = b[0]; o[i] = (expr); } \
	}
F32_BIN(f32_add, x + y)
F32_BIN(f32_sub, x - y)
F32_BIN(f32_mul, x * y)
F32_BIN(f32_div, x / y)
F32_BIN(f32_max, (x != x || x > y) ? x : y)
F32_BIN(f32_min, (x != x || x < y) ? x : y)
F32_BIN(f32_prelu, x < 0 ? x * y : x)

KCLONES static void f32_pow(float *o, const ufloat *a, const ufloat *b, int64_t sa, int64_t sb, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float x = a[sa * i], y = b[sb * i];
		if (y == 2.0f)
			o[i] = x * x;
		else if (y == 0.5f)
			o[i] = sqrtf(x);
		else
			o[i] = powf(x, y);
	}
}

static void f32_fmod(float *o, const ufloat *a, const ufloat *b, int64_t sa, int64_t sb, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		o[i] = fmodf(a[sa * i], b[sb * i]);
}

static void row_bin(const EwJob *j, void *o, const void *const *in, const int64_t *is, int64_t n)
{
	int op = j->op;
	if (j->idt[0] == DT_FLOAT && j->idt[1] == DT_FLOAT && j->odt == DT_FLOAT) {
		void (*f)(float *, const ufloat *, const ufloat *, int64_t, int64_t, int64_t) = NULL;
		switch (op) {
		case B_ADD: f = f32_add; break;
		case B_SUB: f = f32_sub; break;
		case B_MUL: f = f32_mul; break;
		case B_DIV: f = f32_div; break;
		case B_MAX: f = f32_max; break;
		case B_MIN: f = f32_min; break;
		case B_POW: f = f32_pow; break;
		case B_FMOD: case B_MOD: f = f32_fmod; break;
		case B_PRELU: f = f32_prelu; break;
		}
		if (f) {
			f(o, in[0], in[1], is[0], is[1], n);
			return;
		}
	}
	if (j->idt[0] == DT_FLOAT && j->idt[1] == DT_FLOAT && j->odt == DT_BOOL) {
		const ufloat *a = in[0], *b = in[1];
		uint8_t *r = o;
		for (int64_t i = 0; i < n; i++) {
			float x = a[is[0] * i], y = b[is[1] * i];
			switch (op) {
			case B_EQ: r[i] = x == y; break;
			case B_LT: r[i] = x < y; break;
			case B_GT: r[i] = x > y; break;
			case B_LE: r[i] = x <= y; break;
			default: r[i] = x >= y; break;
			}
		}
		return;
	}
	int da = j->idt[0], db = j->idt[1];
	bool fl = dt_is_float(da) || dt_is_float(db);
	bool uns = dt_is_unsigned(da);
	for (int64_t i = 0; i < n; i++) {
		if (fl) {
			double r = bin_f64(op, get_f64(in[0], da, is[0] * i), get_f64(in[1], db, is[1] * i));
			set_f64(o, j->odt, i, r);
		} else {
			int64_t r = bin_i64(op, get_i64(in[0], da, is[0] * i), get_i64(in[1], db, is[1] * i), uns);
			set_i64(o, j->odt, i, r);
		}
	}
}

static const struct { int op; uint32_t types; } bin_ops[OP_COUNT_] = {
	[OP_Add] = {B_ADD, DTM_NUM}, [OP_Sub] = {B_SUB, DTM_NUM}, [OP_Mul] = {B_MUL, DTM_NUM},
	[OP_Div] = {B_DIV, DTM_NUM}, [OP_Pow] = {B_POW, DTM_NUM}, [OP_Mod] = {B_MOD, DTM_NUM},
	[OP_Equal] = {B_EQ, DTM_ALL}, [OP_Less] = {B_LT, DTM_NUM}, [OP_Greater] = {B_GT, DTM_NUM},
	[OP_LessOrEqual] = {B_LE, DTM_NUM}, [OP_GreaterOrEqual] = {B_GE, DTM_NUM},
	[OP_And] = {B_AND, DTM(DT_BOOL)}, [OP_Or] = {B_OR, DTM(DT_BOOL)}, [OP_Xor] = {B_XOR, DTM(DT_BOOL)},
	[OP_BitShift] = {B_SHL, DTM(DT_UINT8) | DTM(DT_UINT16) | DTM(DT_UINT32) | DTM(DT_UINT64)},
	[OP_PRelu] = {B_PRELU, DTM_NUM},
};

int ref_bin_prepare(KCall *c, Diag *d)
{
	int *st = arena_alloc(c->arena, sizeof(int) * 2);
	st[0] = c->node->op;
	c->state = st;
	int op = bin_ops[st[0]].op;
	if (op == B_MOD) {
		int64_t fm;
		if (attr_get_int(c, d, "fmod", 0, &fm))
			return WL_ERR;
		st[1] = fm ? B_FMOD : B_MOD;
	} else if (op == B_SHL) {
		const char *dir = attr_string(c->node, "direction", "");
		if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
			return kfail(c, d, "attribute direction must be LEFT or RIGHT");
		st[1] = strcmp(dir, "LEFT") ? B_SHR : B_SHL;
	} else {
		st[1] = op;
	}
	return WL_OK;
}

int ref_bin_infer(KCall *c, Diag *d)
{
	const int *st = c->state;
	uint32_t types = bin_ops[st[0]].types;
	int op = st[1];
	if (need_in(c, d, 0, types) || need_in(c, d, 1, op == B_POW ? DTM_NUM : types))
		return WL_ERR;
	if (op != B_POW && c->in[0]->dtype != c->in[1]->dtype)
		return kfail(c, d, "tensors '%s' and '%s' have different element types", kin_name(c, 0), kin_name(c, 1));
	if (op == B_FMOD && !dt_is_float(c->in[0]->dtype)) {
		/* fmod=1 on integers: C semantics (allowed) */
	} else if (op == B_MOD && dt_is_float(c->in[0]->dtype)) {
		return kfail(c, d, "Mod on floating point needs fmod=1");
	}
	int nd;
	int64_t dims[RT_MAX_DIMS];
	if (broadcast_shapes(c, d, 2, c->in, &nd, dims))
		return WL_ERR;
	set_out(c->out[0], is_cmp(op) ? DT_BOOL : c->in[0]->dtype, nd, dims);
	return WL_OK;
}

int ref_bin_run(KCall *c, Diag *d)
{
	const int *st = c->state;
	EwJob j = {.op = st[1], .row = row_bin};
	ew_run(c, &j, 2, c->in, c->out[0]);
	(void)d;
	return WL_OK;
}

/* Variadic Max, Min, Sum, Mean: fold into the output, in input order. */
int ref_var_infer(KCall *c, Diag *d)
{
	if (c->nin < 1)
		return kfail(c, d, "needs at least one input");
	for (int i = 0; i < c->nin; i++) {
		if (need_in(c, d, i, DTM_NUM))
			return WL_ERR;
		if (c->in[i]->dtype != c->in[0]->dtype)
			return kfail(c, d, "inputs have different element types");
	}
	int nd;
	int64_t dims[RT_MAX_DIMS];
	if (broadcast_shapes(c, d, c->nin, c->in, &nd, dims))
		return WL_ERR;
	set_out(c->out[0], c->in[0]->dtype, nd, dims);
	return WL_OK;
}

static void row_copy(const EwJob *j, void *o, const void *const *in, const int64_t *is, int64_t n)
{
	int es = j->oes;
	if (is[0])
		memcpy(o, in[0], (size_t)(n * es));
	else
		for (int64_t i = 0; i < n; i++)
			memcpy((char *)o + i * es, in[0], (size_t)es);
}

int ref_var_run(KCall *c, Diag *d)
{
	Op t = c->node->op;
	int op = t == OP_Max ? B_MAX : t == OP_Min ? B_MIN : B_ADD;
	RTensor *o = c->out[0];
	EwJob j0 = {.row = row_copy};
	ew_run(c, &j0, 1, c->in, o);
	for (int i = 1; i < c->nin; i++) {
		RTensor *pair[2] = {o, c->in[i]};
		EwJob j = {.op = op, .row = row_bin};
		ew_run(c, &j, 2, pair, o);
	}
	if (t == OP_Mean && c->nin > 1) {
		int64_t n = rt_numel(o);
		for (int64_t i = 0; i < n; i++) {
			if (dt_is_float(o->dtype))
				set_f64(o->data, o->dtype, i, get_f64(o->data, o->dtype, i) / c->nin);
			else
				set_i64(o->data, o->dtype, i, get_i64(o->data, o->dtype, i) / c->nin);
		}
	}
	(void)d;
	return WL_OK;
}

/* ---------------------------------------------------------------- unary ops */

enum {
	U_SQRT, U_ERF, U_TANH, U_SIGMOID, U_NEG, U_EXP, U_LOG, U_COS, U_SIN, U_RELU,
	U_ABS, U_FLOOR, U_CEIL, U_RECIP, U_SOFTPLUS, U_LEAKY, U_ROUND, U_SIGN,
	U_ELU, U_SELU, U_HSIG, U_HSWISH, U_SOFTSIGN, U_THRELU, U_CELU,
	U_ACOS, U_ASIN, U_ATAN, U_COSH, U_SINH, U_TAN, U_ACOSH, U_ASINH, U_ATANH,
	U_ISNAN, U_ISINF, U_NOT, U_SILU,
};

static const struct { int op; uint32_t types; } un_ops[OP_COUNT_] = {
	[OP_Sqrt] = {U_SQRT, DTM_FLOATS}, [OP_Erf] = {U_ERF, DTM_FLOATS}, [OP_Tanh] = {U_TANH, DTM_FLOATS},
	[OP_Sigmoid] = {U_SIGMOID, DTM_FLOATS}, [OP_Neg] = {U_NEG, DTM_NUM}, [OP_Exp] = {U_EXP, DTM_FLOATS},
	[OP_Log] = {U_LOG, DTM_FLOATS}, [OP_Cos] = {U_COS, DTM_FLOATS}, [OP_Sin] = {U_SIN, DTM_FLOATS},
	[OP_Relu] = {U_RELU, DTM_NUM}, [OP_Abs] = {U_ABS, DTM_NUM}, [OP_Floor] = {U_FLOOR, DTM_FLOATS},
	[OP_Ceil] = {U_CEIL, DTM_FLOATS}, [OP_Reciprocal] = {U_RECIP, DTM_FLOATS},
	[OP_Softplus] = {U_SOFTPLUS, DTM_FLOATS}, [OP_LeakyRelu] = {U_LEAKY, DTM_FLOATS},
	[OP_Round] = {U_ROUND, DTM_FLOATS}, [OP_Sign] = {U_SIGN, DTM_NUM}, [OP_Elu] = {U_ELU, DTM_FLOATS},
	[OP_Selu] = {U_SELU, DTM_FLOATS}, [OP_HardSigmoid] = {U_HSIG, DTM_FLOATS},
	[OP_HardSwish] = {U_HSWISH, DTM_FLOATS}, [OP_Softsign] = {U_SOFTSIGN, DTM_FLOATS},
	[OP_ThresholdedRelu] = {U_THRELU, DTM_FLOATS}, [OP_Celu] = {U_CELU, DTM_FLOATS},
	[OP_Acos] = {U_ACOS, DTM_FLOATS}, [OP_Asin] = {U_ASIN, DTM_FLOATS}, [OP_Atan] = {U_ATAN, DTM_FLOATS},
	[OP_Cosh] = {U_COSH, DTM_FLOATS}, [OP_Sinh] = {U_SINH, DTM_FLOATS}, [OP_Tan] = {U_TAN, DTM_FLOATS},
	[OP_Acosh] = {U_ACOSH, DTM_FLOATS}, [OP_Asinh] = {U_ASINH, DTM_FLOATS}, [OP_Atanh] = {U_ATANH, DTM_FLOATS},
	[OP_IsNaN] = {U_ISNAN, DTM_FLOATS}, [OP_IsInf] = {U_ISINF, DTM_FLOATS}, [OP_Not] = {U_NOT, DTM(DT_BOOL)},
	[OP_WlSiLU] = {U_SILU, DTM_FLOATS},
};

static double un_f64(int op, double x, double p0, double p1)
{
	switch (op) {
	case U_SQRT: return sqrt(x);
	case U_ERF: return erf(x);
	case U_TANH: return tanh(x);
	case U_SIGMOID: return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
	case U_NEG: return -x;
	case U_EXP: return exp(x);
	case U_LOG: return log(x);
	case U_COS: return cos(x);
	case U_SIN: return sin(x);
	case U_RELU: return x > 0 ? x : (x != x ? x : 0.0);
	case U_ABS: return fabs(x);
	case U_FLOOR: return floor(x);
	case U_CEIL: return ceil(x);
	case U_RECIP: return 1 / x;
	case U_SOFTPLUS: return x > 30 ? x : log1p(exp(x));
	case U_LEAKY: return x >= 0 ? x : p0 * x;
	case U_ROUND: return nearbyint(x);
	case U_SIGN: return x > 0 ? 1 : (x < 0 ? -1 : x);
	case U_ELU: return x >= 0 ? x : p0 * (exp(x) - 1);
	case U_SELU: return x > 0 ? p1 * x : p1 * (p0 * exp(x) - p0);
	case U_HSIG: return fmax(0, fmin(1, p0 * x + p1));
	case U_HSWISH: return x * fmax(0, fmin(1, x / 6 + 0.5));
	case U_SOFTSIGN: return x / (1 + fabs(x));
	case U_THRELU: return x > p0 ? x : 0;
	case U_CELU: return fmax(0, x) + fmin(0, p0 * (exp(x / p0) - 1));
	case U_ACOS: return acos(x);
	case U_ASIN: return asin(x);
	case U_ATAN: return atan(x);
	case U_COSH: return cosh(x);
	case U_SINH: return sinh(x);
	case U_TAN: return tan(x);
	case U_ACOSH: return acosh(x);
	case U_ASINH: return asinh(x);
	case U_ATANH: return atanh(x);
	case U_ISNAN: return x != x;
	case U_ISINF: return isinf(x) && ((x > 0 && p1 != 0) || (x < 0 && p0 != 0));
	case U_NOT: return x == 0;
	case U_SILU: return x / (1 + exp(-x));
	default: return 0;
	}
}

static int64_t un_i64(int op, int64_t x, bool uns)
{
	switch (op) {
	case U_NEG: return (int64_t)(0 - (uint64_t)x);
	case U_RELU: return (!uns && x < 0) ? 0 : x;
	case U_ABS: return (!uns && x < 0) ? (int64_t)(0 - (uint64_t)x) : x;
	case U_SIGN: return uns ? (x != 0) : (x > 0) - (x < 0);
	case U_NOT: return x == 0;
	default: return x;
	}
}

/* float32 loops, vectorized per ISA; false if op has none */
KCLONES
static bool un_f32(int op, float p0, float *y, const ufloat *x, int64_t n)
{
	switch (op) {
	case U_SQRT: for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]); return true;
	case U_ERF: for (int64_t i = 0; i < n; i++) y[i] = verff(x[i]); return true;
	case U_TANH: for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]); return true;
	case U_SIGMOID: for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + vexpf(-x[i])); return true;
	case U_NEG: for (int64_t i = 0; i < n; i++) y[i] = -x[i]; return true;
	case U_EXP: for (int64_t i = 0; i < n; i++) y[i] = vexpf(x[i]); return true;
	case U_LOG: for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]); return true;
	case U_COS: for (int64_t i = 0; i < n; i++) y[i] = cosf(x[i]); return true;
	case U_SIN: for (int64_t i = 0; i < n; i++) y[i] = sinf(x[i]); return true;
	case U_RELU: for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : (x[i] != x[i] ? x[i] : 0.0f); return true;
	case U_ABS: for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]); return true;
	case U_RECIP: for (int64_t i = 0; i < n; i++) y[i] = 1.0f / x[i]; return true;
	case U_LEAKY: for (int64_t i = 0; i < n; i++) y[i] = x[i] >= 0 ? x[i] : p0 * x[i]; return true;
	case U_SILU: for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + vexpf(-x[i])); return true;
	default: return false;
	}
}

static void row_un(const EwJob *j, void *o, const void *const *in, const int64_t *is, int64_t n)
{
	int op = j->op;
	if (j->idt[0] == DT_FLOAT && j->odt == DT_FLOAT && is[0] == 1 && un_f32(op, (float)j->p0, o, in[0], n))
		return;
	int dt = j->idt[0];
	bool fl = dt_is_float(dt);
	for (int64_t i = 0; i < n; i++) {
		if (fl || op == U_ISNAN || op == U_ISINF) {
			double r = un_f64(op, get_f64(in[0], dt, is[0] * i), j->p0, j->p1);
			set_f64(o, j->odt, i, r);
		} else {
			set_i64(o, j->odt, i, un_i64(op, get_i64(in[0], dt, is[0] * i), dt_is_unsigned(dt)));
		}
	}
}

typedef struct UnState { Op op; double p0, p1; } UnState;   /* op: the node's (its un_ops row) */

int ref_un_prepare(KCall *c, Diag *d)
{
	UnState *st = arena_alloc(c->arena, sizeof *st);
	c->state = st;
	st->op = c->node->op;
	int op = un_ops[st->op].op;
	float a = 0, b = 0;
	int rc = WL_OK;
	switch (op) {
	case U_LEAKY: rc = attr_get_float(c, d, "alpha", 0.01f, &a); break;
	case U_ELU: rc = attr_get_float(c, d, "alpha", 1.0f, &a); break;
	case U_CELU: rc = attr_get_float(c, d, "alpha", 1.0f, &a); break;
	case U_THRELU: rc = attr_get_float(c, d, "alpha", 1.0f, &a); break;
	case U_SELU:
		rc = attr_get_float(c, d, "alpha", 1.67326319217681884765625f, &a) ||
		     attr_get_float(c, d, "gamma", 1.05070102214813232421875f, &b);
		break;
	case U_HSIG:
		rc = attr_get_float(c, d, "alpha", 0.2f, &a) || attr_get_float(c, d, "beta", 0.5f, &b);
		break;
	case U_ISINF: {
		int64_t dn, dp;
		rc = attr_get_int(c, d, "detect_negative", 1, &dn) || attr_get_int(c, d, "detect_positive", 1, &dp);
		a = (float)dn;
		b = (float)dp;
		break;
	}
	}
	st->p0 = a;
	st->p1 = b;
	return rc ? WL_ERR : WL_OK;
}

int ref_un_infer(KCall *c, Diag *d)
{
	const UnState *st = c->state;
	int op = un_ops[st->op].op;
	uint32_t types = un_ops[st->op].types;
	if (op == U_RELU || op == U_NEG || op == U_ABS || op == U_SIGN)
		types = DTM_NUM;
	if (need_in(c, d, 0, types))
		return WL_ERR;
	int odt = (op == U_ISNAN || op == U_ISINF) ? DT_BOOL : c->in[0]->dtype;
	set_out(c->out[0], odt, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_un_run(KCall *c, Diag *d)
{
	const UnState *st = c->state;
	EwJob j = {.op = un_ops[st->op].op, .p0 = st->p0, .p1 = st->p1, .row = row_un};
	ew_run(c, &j, 1, c->in, c->out[0]);
	(void)d;
	return WL_OK;
}

/* ---------------------------------------------------------------- Clip */

static void row_clip(const EwJob *j, void *o, const void *const *in, const int64_t *is, int64_t n)
{
	int dt = j->idt[0];
	if (dt == DT_FLOAT) {
		const ufloat *x = in[0];
		float *y = o, lo = (float)j->p0, hi = (float)j->p1;
		for (int64_t i = 0; i < n; i++) {
			float v = x[is[0] * i];
			v = v < lo ? lo : v;
			y[i] = v > hi ? hi : v;
		}
		return;
	}
	for (int64_t i = 0; i < n; i++) {
		if (dt_is_float(dt)) {
			double v = get_f64(in[0], dt, is[0] * i);
			v = v < j->p0 ? j->p0 : v;
			set_f64(o, dt, i, v > j->p1 ? j->p1 : v);
		} else {
			int64_t v = get_i64(in[0], dt, is[0] * i), lo = (int64_t)j->p0, hi = (int64_t)j->p1;
			if (dt_is_unsigned(dt)) {
				uint64_t u = (uint64_t)v;
				u = u < (uint64_t)lo ? (uint64_t)lo : u;
				set_i64(o, dt, i, (int64_t)(u > (uint64_t)hi ? (uint64_t)hi : u));
			} else {
				v = v < lo ? lo : v;
				set_i64(o, dt, i, v > hi ? hi : v);
			}
		}
	}
}

int ref_clip_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_NUM))
		return WL_ERR;
	for (int i = 1; i < c->nin && i < 3; i++)
		if (c->in[i] && (c->in[i]->dtype != c->in[0]->dtype || rt_numel(c->in[i]) != 1))
			return kfail(c, d, "tensor '%s': min/max must be a scalar of the input's type", kin_name(c, i));
	set_out(c->out[0], c->in[0]->dtype, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_clip_run(KCall *c, Diag *d)
{
	int dt = c->in[0]->dtype;
	double lo, hi;
	if (dt_is_float(dt)) {
		lo = -INFINITY;
		hi = INFINITY;
	} else if (dt_is_unsigned(dt)) {
		lo = 0;
		hi = dt == DT_UINT64 ? (double)INT64_MAX : ldexp(1, elem_size(dt) * 8) - 1;
	} else {
		lo = -ldexp(1, elem_size(dt) * 8 - 1);
		hi = ldexp(1, elem_size(dt) * 8 - 1) - 1;
	}
	if (c->opset < 11) {
		float a, b;
		if (attr_get_float(c, d, "min", -3.402823466e+38f, &a) || attr_get_float(c, d, "max", 3.402823466e+38f, &b))
			return WL_ERR;
		lo = a;
		hi = b;
	} else {
		if (c->nin > 1 && c->in[1])
			lo = dt_is_float(dt) ? scalar_f64(c->in[1]) : (double)scalar_i64(c->in[1]);
		if (c->nin > 2 && c->in[2])
			hi = dt_is_float(dt) ? scalar_f64(c->in[2]) : (double)scalar_i64(c->in[2]);
	}
	EwJob j = {.p0 = lo, .p1 = hi, .row = row_clip};
	ew_run(c, &j, 1, c->in, c->out[0]);
	return WL_OK;
}

/* ---------------------------------------------------------------- Cast */

static void row_cast(const EwJob *j, void *o, const void *const *in, const int64_t *is, int64_t n)
{
	int si = j->idt[0], so = j->odt;
	if (si == so) {
		row_copy(j, o, in, is, n);
		return;
	}
	if (si == DT_FLOAT && so == DT_FLOAT16 && is[0] == 1) {
		for (int64_t i = 0; i < n; i++)
			((uint16_t *)o)[i] = rt_float_to_half(((const ufloat *)in[0])[i]);
		return;
	}
	if (si == DT_FLOAT16 && so == DT_FLOAT && is[0] == 1) {
		for (int64_t i = 0; i < n; i++)
			((float *)o)[i] = rt_half_to_float(((const u16u *)in[0])[i]);
		return;
	}
	for (int64_t i = 0; i < n; i++) {
		if (so == DT_BOOL) {
			double v = dt_is_float(si) ? get_f64(in[0], si, is[0] * i) : (double)(get_i64(in[0], si, is[0] * i) != 0);
			set_i64(o, so, i, v != 0);
		} else if (dt_is_float(si)) {
			double v = get_f64(in[0], si, is[0] * i);
			if (si == DT_FLOAT && so == DT_BFLOAT16)
				((uint16_t *)o)[i] = float_to_bf16((float)v);
			else if (dt_is_float(so))
				set_f64(o, so, i, v);
			else
				set_f64(o, so, i, v);      /* truncates toward zero, saturates */
		} else if (dt_is_float(so)) {
			if (si == DT_UINT64)
				set_f64(o, so, i, (double)get_u64(in[0], si, is[0] * i));
			else {
				int64_t v = get_i64(in[0], si, is[0] * i);
				if (so == DT_FLOAT)
					((float *)o)[i] = (float)v;        /* one rounding */
				else
					set_f64(o, so, i, (double)v);
			}
		} else {
			set_i64(o, so, i, get_i64(in[0], si, is[0] * i));
		}
	}
}

int ref_cast_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL))
		return WL_ERR;
	int to;
	if (c->node->op == OP_CastLike) {
		if (need_in(c, d, 1, DTM_ALL))
			return WL_ERR;
		to = c->in[1]->dtype;
	} else {
		int64_t t;
		if (attr_get_int(c, d, "to", 0, &t))
			return WL_ERR;
		to = (int)t;
	}
	if (elem_size(to) == 0)
		return kfail(c, d, "cast to %s is not supported", dtype_name(to) ? dtype_name(to) : "?");
	set_out(c->out[0], to, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_cast_run(KCall *c, Diag *d)
{
	EwJob j = {.row = row_cast};
	ew_run(c, &j, 1, c->in, c->out[0]);
	(void)d;
	return WL_OK;
}

/* ---------------------------------------------------------------- DequantizeLinear */

/* y = (float(x) - float(zp)) * scale: x int8/uint8/int32, scale float32 one
 * value (per tensor) or [D] along `axis` (per axis, default 1), zp like x. */
static int dql_params(const KCall *c, Diag *d, int64_t *axis, int64_t *inner)
{
	if (need_in(c, d, 0, DTM(DT_INT8) | DTM(DT_UINT8) | DTM(DT_INT32)) || need_in(c, d, 1, DTM(DT_FLOAT)))
		return WL_ERR;
	const RTensor *x = c->in[0], *sc = c->in[1], *zp = c->nin > 2 ? c->in[2] : NULL;
	char b1[96], b2[96];
	if (zp && (zp->dtype != x->dtype || rt_numel(zp) != rt_numel(sc)))
		return kfail(c, d, "tensor '%s' %s: zero point must be %s with as many values as the scale", kin_name(c, 2),
		             kdesc(zp, b1), dtype_name(x->dtype));
	*axis = -1;
	*inner = 1;
	if (rt_numel(sc) == 1 && sc->ndim <= 1)
		return WL_OK;
	int64_t ax;
	if (attr_get_int(c, d, "axis", 1, &ax))
		return WL_ERR;
	if (ax < 0)
		ax += x->ndim;
	if (sc->ndim != 1 || ax < 0 || ax >= x->ndim || sc->dims[0] != x->dims[ax])
		return kfail(c, d, "tensor '%s' %s: a per-axis scale must be [%s dim %lld] of '%s' %s", kin_name(c, 1),
		             kdesc(sc, b1), "the", (long long)ax, kin_name(c, 0), kdesc(x, b2));
	*axis = ax;
	for (int i = (int)ax + 1; i < x->ndim; i++)
		*inner *= x->dims[i];
	return WL_OK;
}

int ref_dql_infer(KCall *c, Diag *d)
{
	int64_t ax, inner;
	if (dql_params(c, d, &ax, &inner))
		return WL_ERR;
	set_out(c->out[0], DT_FLOAT, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_dql_run(KCall *c, Diag *d)
{
	int64_t ax, inner;
	if (dql_params(c, d, &ax, &inner))
		return WL_ERR;
	const RTensor *x = c->in[0], *sc = c->in[1], *zp = c->nin > 2 ? c->in[2] : NULL;
	int64_t n = rt_numel(x), D = ax < 0 ? 1 : x->dims[ax];
	float *y = c->out[0]->data;
	for (int64_t i = 0; i < n; i++) {
		int64_t k = ax < 0 ? 0 : (i / inner) % D;
		double z = zp ? get_f64(zp->data, zp->dtype, k) : 0.0;
		float s = (float)get_f64(sc->data, DT_FLOAT, k);
		y[i] = (float)(get_f64(x->data, x->dtype, i) - z) * s;
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- Where */

static void row_where(const EwJob *j, void *o, const void *const *in, const int64_t *is, int64_t n)
{
	const uint8_t *cnd = in[0];
	int es = j->oes;
	if (es == 4) {
		const u32u *x = in[1], *y = in[2];
		uint32_t *r = o;
		for (int64_t i = 0; i < n; i++)
			r[i] = cnd[is[0] * i] ? x[is[1] * i] : y[is[2] * i];
		return;
	}
	for (int64_t i = 0; i < n; i++) {
		const char *src = cnd[is[0] * i] ? (const char *)in[1] + is[1] * i * es : (const char *)in[2] + is[2] * i * es;
		memcpy((char *)o + i * es, src, (size_t)es);
	}
}

int ref_where_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM(DT_BOOL)) || need_in(c, d, 1, DTM_ALL) || need_in(c, d, 2, DTM_ALL))
		return WL_ERR;
	if (c->in[1]->dtype != c->in[2]->dtype)
		return kfail(c, d, "tensors '%s' and '%s' have different element types", kin_name(c, 1), kin_name(c, 2));
	int nd;
	int64_t dims[RT_MAX_DIMS];
	if (broadcast_shapes(c, d, 3, c->in, &nd, dims))
		return WL_ERR;
	set_out(c->out[0], c->in[1]->dtype, nd, dims);
	return WL_OK;
}

int ref_where_run(KCall *c, Diag *d)
{
	EwJob j = {.row = row_where};
	ew_run(c, &j, 3, c->in, c->out[0]);
	(void)d;
	return WL_OK;
}

/* Expand: broadcast the input to a shape (data input 1). */
int ref_expand_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL) || need_in(c, d, 1, DTM_IDX))
		return WL_ERR;
	int64_t shp[RT_MAX_DIMS];
	int n;
	if (read_ints(c, 1, shp, RT_MAX_DIMS, &n, d))
		return WL_ERR;
	RTensor tmp = {.dtype = c->in[0]->dtype, .ndim = n};
	for (int i = 0; i < n; i++) {
		if (shp[i] < 0)
			return kfail(c, d, "tensor '%s': negative dimension %lld", kin_name(c, 1), (long long)shp[i]);
		tmp.dims[i] = shp[i];
	}
	RTensor *two[2] = {c->in[0], &tmp};
	int nd;
	int64_t dims[RT_MAX_DIMS];
	if (broadcast_shapes(c, d, 2, two, &nd, dims))
		return WL_ERR;
	set_out(c->out[0], c->in[0]->dtype, nd, dims);
	return WL_OK;
}

int ref_expand_run(KCall *c, Diag *d)
{
	EwJob j = {.row = row_copy};
	ew_run(c, &j, 1, c->in, c->out[0]);
	(void)d;
	return WL_OK;
}
