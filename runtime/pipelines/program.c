/* program.c — one program of a pipeline behind one interface, whatever runs
 * it: "ref" (the reference executor on DIR/model.onnx, the fused graph),
 * "host" (libwlower_rt on DIR/module.so) or "qc" (a Chimera module folder on
 * the bit-exact emulator: one module_sim process for every run,
 * targets/chimera/sim/session.c). Outputs are views of the runner's own
 * buffers (no copies). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pipeline.h"
#include "runtime/rt/wlower_rt.h"
#include "targets/chimera/sim/sim.h"

struct Program {
	char *dir;
	Module *mod;               /* ref */
	Exec *exec;
	WlModule *wl;              /* host */
	SimSession *sim;           /* qc */
	const void **sim_in;       /* qc: the bound inputs, in the module's order */
	ExecObserver obs;          /* ref: calibration */
	void *obs_ctx;
	ProgramStats st;
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

static int open_qc(Program *p, Diag *d)
{
	if (sim_session_open(p->dir, !isatty(2), &p->sim, d) != WL_OK)   /* build messages on a terminal */
		return WL_ERR;
	p->nout = sim_session_count(p->sim, true);
	if (!(p->sim_in = calloc((size_t)sim_session_count(p->sim, false) + 1, sizeof *p->sim_in)))
		wl_die(__FILE__, __LINE__, "out of memory");
	p->st.cycles_per_run = sim_session_cost(p->sim)->total_cycles;
	p->st.clock_hz = sim_session_schedule(p->sim)->cfg.clock_hz;
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
	else if (strcmp(runner, "qc") == 0)
		rc = open_qc(p, d);
	else
		rc = diag_fail(d, "%s: unknown runner '%s' (ref, host, qc)", dir, runner);
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
	sim_session_close(p->sim);
	free(p->sim_in);
	free(p->st.saturated);
	free(p->outs);
	free(p->dir);
	free(p);
}

/* qc: t must be input `name` of the module, of its dtype and shape. */
static int bind_qc(Program *p, const char *name, const RTensor *t, Diag *d)
{
	for (int i = 0; i < sim_session_count(p->sim, false); i++) {
		const SimIo *io = sim_session_io(p->sim, false, i);
		if (strcmp(io->name, name) != 0)
			continue;
		bool ok = (int)t->dtype == io->dtype && t->ndim == io->ndim && t->nbytes == io->bytes;
		for (int k = 0; ok && k < io->ndim; k++)
			ok = t->dims[k] == io->dims[k];
		if (!ok) {
			char got[128];
			return diag_fail(d, "%s: input '%s': got %s, not what the module was compiled for", p->dir, name,
			                 rt_describe(t, got, sizeof got));
		}
		p->sim_in[i] = t->data;
		return WL_OK;
	}
	return diag_fail(d, "%s: the program has no input '%s'", p->dir, name);
}

int program_bind(Program *p, const char *name, const RTensor *t, Diag *d)
{
	if (p->sim)
		return bind_qc(p, name, t, d);
	if (p->exec) {
		if (exec_bind(p->exec, name, t, d) != WL_OK)
			return WL_ERR;
		for (int i = 0; p->obs && i < exec_input_count(p->exec); i++)
			if (strcmp(exec_input(p->exec, i)->name, name) == 0)
				p->obs(p->obs_ctx, exec_input(p->exec, i), t);
		return WL_OK;
	}
	if (wl_bind_input(p->wl, name, t->data, t->dtype, t->ndim, t->dims) != 0)
		return diag_fail(d, "%s: %s", p->dir, wl_error(p->wl));
	return WL_OK;
}

static int run_qc(Program *p, Diag *d)
{
	for (int i = 0; i < sim_session_count(p->sim, false); i++)
		if (!p->sim_in[i])
			return diag_fail(d, "%s: input '%s' was not bound", p->dir, sim_session_io(p->sim, false, i)->name);
	if (sim_session_run(p->sim, p->sim_in, d) != WL_OK)
		return WL_ERR;
	ProgramStats *st = &p->st;
	if (st->runs % 64 == 0 && !(st->saturated = realloc(st->saturated, (size_t)(st->runs + 64) * sizeof *st->saturated)))
		wl_die(__FILE__, __LINE__, "out of memory");
	st->saturated[st->runs] = sim_session_saturated(p->sim);
	const char *k = sim_session_saturated_kernel(p->sim);
	if (k && !st->first_saturated_kernel[0])
		snprintf(st->first_saturated_kernel, sizeof st->first_saturated_kernel, "%s", k);
	return WL_OK;
}

int program_run(Program *p, Diag *d)
{
	int rc;
	if (p->sim)
		rc = run_qc(p, d);
	else if (p->exec)
		rc = exec_run(p->exec, d);
	else if (wl_run(p->wl) != 0)
		rc = diag_fail(d, "%s: %s", p->dir, wl_error(p->wl));
	else
		rc = WL_OK;
	if (rc == WL_OK)
		p->st.runs++;
	return rc;
}

const ProgramStats *program_stats(const Program *p) { return &p->st; }

void program_stats_reset(Program *p)
{
	p->st.runs = 0;
	p->st.first_saturated_kernel[0] = 0;
}

int program_observe(Program *p, ExecObserver fn, void *ctx, Diag *d)
{
	if (!p->exec)
		return diag_fail(d, "%s: only the ref runner can be observed (calibration)", p->dir);
	p->obs = fn;
	p->obs_ctx = ctx;
	exec_set_observer(p->exec, fn, ctx);
	return WL_OK;
}

Module *program_module(Program *p) { return p->mod; }
const char *program_dir(const Program *p) { return p->dir; }
const char *program_runner(const Program *p) { return p->sim ? "qc" : p->exec ? "ref" : "host"; }

int program_print_report(const Program *p, FILE *f)
{
	if (!p->sim)
		return 0;
	SimReport rep;
	sim_session_report(p->sim, &rep);
	sim_print_report(f, &rep);
	return 1;
}

const RTensor *program_output(Program *p, const char *name, Diag *d)
{
	if (p->sim) {
		for (int i = 0; i < p->nout; i++) {
			const SimIo *io = sim_session_io(p->sim, true, i);
			if (strcmp(io->name, name) != 0)
				continue;
			RTensor *t = &p->outs[i];
			t->dtype = io->dtype;
			t->ndim = io->ndim;
			for (int k = 0; k < io->ndim; k++)
				t->dims[k] = io->dims[k];
			t->data = sim_session_output(p->sim, i);
			t->nbytes = io->bytes;
			t->owned = false;
			return t;
		}
		diag_fail(d, "%s: the program has no output '%s'", p->dir, name);
		return NULL;
	}
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
