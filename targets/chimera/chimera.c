/* chimera.c — chimera_compile: lower the fused, numerics-annotated module to
 * CCL-style C++ plus schedule.json, weights.bin and manifest.json.
 * (Placeholder until the lowering lands.) */
#include "../target.h"

int chimera_compile(Module *m, const TargetOptions *o, const char *dir, Diag *d)
{
	(void)m; (void)dir;
	return diag_fail(d, "%s: --target %s: the chimera back end is not built yet", o->model_path, o->target_name);
}
