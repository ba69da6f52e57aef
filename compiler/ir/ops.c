/* ops.c — the op table generated from ops.def, lookup by (domain, name), and
 * the one place that knows which domain names mean the default domain. */
#include <string.h>
#include "ir.h"

const OpInfo op_info[OP_COUNT_] = {
	[OP_UNKNOWN] = {"?", "", 0, -1, 0, -1},
#define OP(e, name, dom, mini, maxi, mino, maxo) [OP_##e] = {name, dom, mini, maxi, mino, maxo},
#include "ops.def"
#undef OP
};

bool domain_is_default(const char *d)
{
	return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

bool domain_eq(const char *a, const char *b)
{
	if (domain_is_default(a) || domain_is_default(b))
		return domain_is_default(a) && domain_is_default(b);
	return strcmp(a, b) == 0;
}

Op op_lookup(const char *domain, const char *op_type)
{
	if (!op_type)
		return OP_UNKNOWN;
	for (int i = 1; i < OP_COUNT_; i++)
		if (strcmp(op_info[i].name, op_type) == 0 && domain_eq(op_info[i].domain, domain))
			return (Op)i;
	/* ONNX Runtime registers SimplifiedLayerNormalization in both domains. */
	if (strcmp(op_type, "SimplifiedLayerNormalization") == 0 && domain && strcmp(domain, "com.microsoft") == 0)
		return OP_MsSimplifiedLayerNormalization;
	return OP_UNKNOWN;
}
