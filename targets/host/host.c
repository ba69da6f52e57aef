/* host.c — host_compile: LLVM C API code generation → module.so.
 * (Placeholder until the code generator lands.) */
#include "../target.h"

int host_compile(Module *m, const TargetOptions *o, const char *dir, Diag *d)
{
	(void)m; (void)dir;
	return diag_fail(d, "%s: --target host: the host back end is not built yet", o->model_path);
}
