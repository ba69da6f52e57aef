/* program.c — one program of a pipeline behind one interface, whatever runs
 * it: "ref" (the reference executor on DIR/model.onnx, the fused graph) or
 * "host" (libwlower_rt on DIR/module.so). Outputs are views of the runner's
 * own buffers (no copies). */
#include <stdlib.h>
#include <string.h>
#include "pipeline.h"
#include "runtime/rt/wlower_rt.h"

struct Program {
	char *dir;
	Module *mod;               /* ref */
	Exec *exec;
	WlModule *wl;              /* host */
	RTensor *outs;             /* views, one per output */
	int nout;
};

static int open_ref(Program *p, int threads, Diag *d)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/model.onnx", p->dir);
	if (model_read(path, &p->mod, d) != WL_OK || exec_new(p->mod, threads, &p->exec, d) != WL_OK)
		return WL_ERR;
	p->nout = exec_output_count(p->exec);
	return WL_OK;
}

static int open_host(Program *p, int threads, Diag *d)
{
	char *err = NULL;
	p->wl = wl_open(p->dir, threads, &err);
	if (!p->wl) {
		diag_fail(d, "%s", err ? err : "cannot open the module");
		free(err);
		return WL_ERR;
	}
	p->nout = wl_output_count(p->wl);
	return WL_OK;
}

int program_open(const char *dir, const char *runner, int threads, Program **out, Diag *d)
{
	Program *p = calloc(1, sizeof *p);
	if (!p || !(p->dir = strdup(dir)))
		wl_die(__FILE__, __LINE__, "out of memory");
	int rc;
	if (strcmp(runner, "ref") == 0)
		rc = open_ref(p, threads, d);
	else if (strcmp(runner, "host") == 0)
		rc = open_host(p, threads, d);
	else
		rc = diag_fail(d, "%s: unknown runner '%s' (ref, host)", dir, runner);
	if (rc == WL_OK && !(p->outs = calloc((size_t)(p->nout > 0 ? p->nout : 1), sizeof *p->outs)))
		wl_die(__FILE__, __LINE__, "out of memory");
	if (rc != WL_OK) {
		program_close(p);
		return WL_ERR;
	}
	*out = p;
	return WL_OK;
}

void program_close(Program *p)
{
	if (!p)
		return;
	exec_free(p->exec);
	if (p->mod)
		module_free(p->mod);
	if (p->wl)
		wl_close(p->wl);
	free(p->outs);
	free(p->dir);
	free(p);
}

int program_bind(Program *p, const char *name, const RTensor *t, Diag *d)
{
	if (p->exec)
		return exec_bind(p->exec, name, t, d);
	if (wl_bind_input(p->wl, name, t->data, t->dtype, t->ndim, t->dims) != 0)
		return diag_fail(d, "%s: %s", p->dir, wl_error(p->wl));
	return WL_OK;
}

int program_run(Program *p, Diag *d)
{
	if (p->exec)
		return exec_run(p->exec, d);
	if (wl_run(p->wl) != 0)
		return diag_fail(d, "%s: %s", p->dir, wl_error(p->wl));
	return WL_OK;
}

const RTensor *program_output(Program *p, const char *name, Diag *d)
{
	if (p->exec) {
		for (int i = 0; i < p->nout; i++)
			if (strcmp(exec_output_name(p->exec, i), name) == 0)
				return exec_output(p->exec, i);
		diag_fail(d, "%s: the program has no output '%s'", p->dir, name);
		return NULL;
	}
	int i = wl_output_index(p->wl, name);
	WlTensorInfo info;
	const void *data = i >= 0 ? wl_output(p->wl, i, &info) : NULL;
	if (!data) {
		diag_fail(d, "%s: the program has no output '%s'", p->dir, name);
		return NULL;
	}
	RTensor *t = &p->outs[i];
	t->dtype = info.dtype;
	t->ndim = info.ndim;
	for (int k = 0; k < info.ndim; k++)
		t->dims[k] = info.shape[k];
	t->data = (void *)data;
	t->nbytes = info.nbytes;
	t->owned = false;
	return t;
}
