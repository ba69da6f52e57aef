/* roundtrip.c — ONNX import/export conformance over libonnx-testdata.
 *
 *   roundtrip [DIR] [--no-checker] [-v]
 *
 * For every model.onnx under DIR (default /usr/share/libonnx-testdata/data/,
 * searched recursively: node/, pytorch-converted/, pytorch-operator/, real/,
 * simple/):
 *   import → export to memory (A) → import → export again (B);
 *   A and B must be byte-identical, and the two imports must agree on nodes
 *   (op type, domain, inputs, outputs, attributes), graph inputs and outputs
 *   with their types, and initializer bytes, recursively into subgraphs;
 *   the first import must agree with protobuf-c's own unpack of the file
 *   (number of nodes, initializers, inputs, outputs; initializer bytes).
 * Then, unless --no-checker, /usr/bin/python3 runs onnx.checker on every
 * original and its export A: an original the checker accepts must still be
 * accepted after export.
 *
 * Prints `conformance: N passed, M failed`, lists the failures, and exits 1
 * on any failure (every node/ model must import).
 */
#include <ftw.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler/onnx/onnx.h"
#include "onnx.pb-c.h"

#define DEFAULT_DIR "/usr/share/libonnx-testdata/data/"
#define PYTHON "/usr/bin/python3"

static char **paths;
static size_t npaths, cappaths;

static int
collect(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	const char *b = p + ftw->base;
	if (type != FTW_F || strcmp(b, "model.onnx") != 0)
		return 0;
	if (npaths == cappaths) {
		cappaths = cappaths ? 2 * cappaths : 256;
		paths = realloc(paths, cappaths * sizeof *paths);
		if (!paths)
			abort();
	}
	paths[npaths] = strdup(p);
	if (!paths[npaths])
		abort();
	npaths++;
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---------------------------------------------------------------- IR vs IR */

static char why[1024];

static int
differ(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	return 1;
}

static const char *
vname(const Value *v)
{
	return v ? v->name : "";
}

static int cmp_graph(const Graph *a, const Graph *b);

static int
cmp_tensor(const Tensor *a, const Tensor *b)
{
	if (a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes)
		return differ("tensor '%s': dtype/shape/size differ", a->name);
	for (int i = 0; i < a->ndim; i++)
		if (a->dims[i] != b->dims[i])
			return differ("tensor '%s': dims differ", a->name);
	if (a->nbytes && memcmp(a->data, b->data, a->nbytes) != 0)
		return differ("tensor '%s': bytes differ", a->name);
	if (a->dtype == DT_STRING) {
		int64_t n = tensor_numel(a);
		for (int64_t i = 0; i < n; i++)
			if (a->strs[i].len != b->strs[i].len ||
			    memcmp(a->strs[i].ptr, b->strs[i].ptr, a->strs[i].len) != 0)
				return differ("tensor '%s': strings differ", a->name);
	}
	return 0;
}

static int
cmp_attr(const Attr *a, const Attr *b)
{
	if (strcmp(a->name, b->name) != 0 || a->type != b->type || a->n != b->n)
		return differ("attribute '%s' differs", a->name);
	switch (a->type) {
	case AT_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) ? differ("attr %s", a->name) : 0;
	case AT_INT: return a->i != b->i ? differ("attr %s", a->name) : 0;
	case AT_STRING:
		return a->s.len != b->s.len || memcmp(a->s.ptr, b->s.ptr, a->s.len) ? differ("attr %s", a->name) : 0;
	case AT_TENSOR: return cmp_tensor(a->t, b->t);
	case AT_GRAPH: return cmp_graph(a->g, b->g);
	case AT_INTS:
		return a->n && memcmp(a->ints, b->ints, (size_t)a->n * 8) ? differ("attr %s", a->name) : 0;
	case AT_FLOATS:
		return a->n && memcmp(a->floats, b->floats, (size_t)a->n * 4) ? differ("attr %s", a->name) : 0;
	case AT_GRAPHS:
		for (int i = 0; i < a->n; i++)
			if (cmp_graph(a->graphs[i], b->graphs[i]))
				return 1;
		return 0;
	case AT_TENSORS:
		for (int i = 0; i < a->n; i++)
			if (cmp_tensor(a->tensors[i], b->tensors[i]))
				return 1;
		return 0;
	default:
		return 0;
	}
}

static int
cmp_node(const Node *a, const Node *b)
{
	if (strcmp(a->op_type, b->op_type) || strcmp(a->domain, b->domain) || strcmp(a->name, b->name))
		return differ("node '%s' (%s): op or name differs", a->name, a->op_type);
	if (a->ninputs != b->ninputs || a->noutputs != b->noutputs || a->nattrs != b->nattrs)
		return differ("node '%s' (%s): arity differs", a->name, a->op_type);
	for (int i = 0; i < a->ninputs; i++)
		if (strcmp(vname(a->inputs[i]), vname(b->inputs[i])))
			return differ("node '%s': input %d differs", a->name, i);
	for (int i = 0; i < a->noutputs; i++)
		if (strcmp(vname(a->outputs[i]), vname(b->outputs[i])))
			return differ("node '%s': output %d differs", a->name, i);
	for (int i = 0; i < a->nattrs; i++)
		if (cmp_attr(&a->attrs[i], &b->attrs[i]))
			return 1;
	return 0;
}

static int
cmp_values(const char *what, Value **a, int na, Value **b, int nb)
{
	if (na != nb)
		return differ("%s: %d vs %d", what, na, nb);
	for (int i = 0; i < na; i++)
		if (strcmp(a[i]->name, b[i]->name) || !type_equal(&a[i]->type, &b[i]->type))
			return differ("%s '%s' differs", what, a[i]->name);
	return 0;
}

static int
cmp_graph(const Graph *a, const Graph *b)
{
	if (a->nnodes != b->nnodes)
		return differ("graph '%s': %d vs %d nodes", a->name, a->nnodes, b->nnodes);
	if (cmp_values("input", a->inputs, a->ninputs, b->inputs, b->ninputs) ||
	    cmp_values("output", a->outputs, a->noutputs, b->outputs, b->noutputs) ||
	    cmp_values("initializer", a->inits, a->ninits, b->inits, b->ninits))
		return 1;
	for (int i = 0; i < a->ninits; i++)
		if (cmp_tensor(a->inits[i]->init, b->inits[i]->init))
			return 1;
	for (const Node *x = a->first, *y = b->first; x && y; x = x->next, y = y->next)
		if (cmp_node(x, y))
			return 1;
	return 0;
}

/* ---------------------------------------------------------------- IR vs protobuf-c */

/* Raw bytes of a TensorProto as protobuf-c unpacked it (NULL: not
 * comparable here, e.g. external data or strings). */
static const void *
proto_bytes(const Onnx__TensorProto *tp, size_t *n, void **tofree)
{
	*tofree = NULL;
	if (tp->has_raw_data) {
		*n = tp->raw_data.len;
		return tp->raw_data.data;
	}
	switch (tp->data_type) {
	case DT_FLOAT: case DT_COMPLEX64:
		*n = tp->n_float_data * 4;
		return tp->float_data;
	case DT_DOUBLE: case DT_COMPLEX128:
		*n = tp->n_double_data * 8;
		return tp->double_data;
	case DT_INT64:
		*n = tp->n_int64_data * 8;
		return tp->int64_data;
	case DT_UINT64:
		*n = tp->n_uint64_data * 8;
		return tp->uint64_data;
	case DT_INT32:
		*n = tp->n_int32_data * 4;
		return tp->int32_data;
	case DT_INT8: case DT_UINT8: case DT_BOOL: {
		uint8_t *p = malloc(tp->n_int32_data + 1);
		for (size_t i = 0; i < tp->n_int32_data; i++)
			p[i] = (uint8_t)tp->int32_data[i];
		*n = tp->n_int32_data;
		*tofree = p;
		return p;
	}
	case DT_INT16: case DT_UINT16: case DT_FLOAT16: case DT_BFLOAT16: {
		uint16_t *p = malloc(2 * tp->n_int32_data + 2);
		for (size_t i = 0; i < tp->n_int32_data; i++)
			p[i] = (uint16_t)tp->int32_data[i];
		*n = 2 * tp->n_int32_data;
		*tofree = p;
		return p;
	}
	default:
		return NULL;
	}
}

static int
cmp_proto(const Module *m, const Onnx__GraphProto *gp)
{
	const Graph *g = m->graph;

	if ((size_t)g->nnodes != gp->n_node)
		return differ("protobuf-c: %zu nodes, imported %d", gp->n_node, g->nnodes);
	if ((size_t)g->ninits != gp->n_initializer)
		return differ("protobuf-c: %zu initializers, imported %d", gp->n_initializer, g->ninits);
	if ((size_t)g->ninputs != gp->n_input || (size_t)g->noutputs != gp->n_output)
		return differ("protobuf-c: inputs/outputs differ");
	for (size_t i = 0; i < gp->n_initializer; i++) {
		const Onnx__TensorProto *tp = gp->initializer[i];
		const Tensor *t = g->inits[i]->init;
		void *tofree;
		size_t n = 0;
		if (strcmp(tp->name, t->name))
			return differ("protobuf-c: initializer %zu is '%s', imported '%s'", i, tp->name, t->name);
		const void *p = proto_bytes(tp, &n, &tofree);
		int bad = p && (n != t->nbytes || (n && memcmp(p, t->data, n) != 0));
		free(tofree);
		if (bad)
			return differ("protobuf-c: initializer '%s' bytes differ", t->name);
	}
	for (size_t i = 0; i < gp->n_input; i++)
		if (strcmp(gp->input[i]->name, g->inputs[i]->name))
			return differ("protobuf-c: input %zu differs", i);
	for (size_t i = 0; i < gp->n_output; i++)
		if (strcmp(gp->output[i]->name, g->outputs[i]->name))
			return differ("protobuf-c: output %zu differs", i);
	return 0;
}

/* ---------------------------------------------------------------- one model */

static int
check_model(const char *path, const char *export_to)
{
	Module *m1 = NULL, *m2 = NULL;
	void *b1 = NULL, *b2 = NULL;
	size_t n1 = 0, n2 = 0;
	Diag d = {0};
	int bad = 1;

	why[0] = 0;
	if (onnx_import_file(path, &m1, &d) != WL_OK) {
		snprintf(why, sizeof why, "import: %.900s", d.msg);
		goto out;
	}
	if (onnx_export_buffer(m1, &b1, &n1, &d) != WL_OK) {
		snprintf(why, sizeof why, "export: %.900s", d.msg);
		goto out;
	}
	if (onnx_import_buffer(b1, n1, "<export>", &m2, &d) != WL_OK) {
		snprintf(why, sizeof why, "re-import: %.900s", d.msg);
		goto out;
	}
	if (onnx_export_buffer(m2, &b2, &n2, &d) != WL_OK) {
		snprintf(why, sizeof why, "re-export: %.900s", d.msg);
		goto out;
	}
	if (n1 != n2 || memcmp(b1, b2, n1) != 0) {
		snprintf(why, sizeof why, "exports differ (%zu vs %zu bytes)", n1, n2);
		goto out;
	}
	if (cmp_graph(m1->graph, m2->graph))
		goto out;
	MappedFile mf;
	if (file_map(path, &mf, &d) != WL_OK) {
		snprintf(why, sizeof why, "%.900s", d.msg);
		goto out;
	}
	Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, mf.len, mf.addr);
	int pb = mp && mp->graph ? cmp_proto(m1, mp->graph) : differ("protobuf-c cannot unpack it");
	if (mp)
		onnx__model_proto__free_unpacked(mp, NULL);
	munmap(mf.addr, mf.len);
	if (pb)
		goto out;
	if (export_to) {
		FILE *f = fopen(export_to, "wb");
		if (!f || fwrite(b1, 1, n1, f) != n1 || fclose(f) != 0) {
			snprintf(why, sizeof why, "cannot write %s", export_to);
			goto out;
		}
	}
	bad = 0;
out:
	free(b1);
	free(b2);
	module_free(m1);
	module_free(m2);
	return bad;
}

/* ---------------------------------------------------------------- onnx.checker */

static const char checker_py[] =
	"import sys, onnx\n"
	"for line in sys.stdin:\n"
	"    orig, exp = line.rstrip('\\n').split('\\t')\n"
	"    try:\n"
	"        onnx.checker.check_model(onnx.load(orig))\n"
	"    except Exception:\n"
	"        print('SKIP\\t' + orig); continue\n"
	"    try:\n"
	"        onnx.checker.check_model(onnx.load(exp)); print('OK\\t' + orig)\n"
	"    except Exception as e:\n"
	"        print('FAIL\\t' + orig + '\\t' + str(e).replace('\\n', ' ')[:300])\n";

/* Returns the number of exports the checker rejected (originals accepted). */
static int
run_checker(const char *listfile, int *accepted)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "%s -c \"$WL_CHECKER\" < '%s'", PYTHON, listfile);
	if (setenv("WL_CHECKER", checker_py, 1) != 0)
		return -1;
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	char line[4096];
	int fails = 0;
	*accepted = 0;
	while (fgets(line, sizeof line, p)) {
		if (strncmp(line, "OK\t", 3) == 0)
			(*accepted)++;
		else if (strncmp(line, "FAIL\t", 5) == 0) {
			fails++;
			printf("FAIL checker: %s", line + 5);
		}
	}
	if (pclose(p) != 0)
		return -1;
	return fails;
}

int
main(int argc, char **argv)
{
	const char *dir = DEFAULT_DIR;
	bool checker = true, verbose = false;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--no-checker") == 0)
			checker = false;
		else if (strcmp(argv[i], "-v") == 0)
			verbose = true;
		else
			dir = argv[i];
	}
	if (access(PYTHON, X_OK) != 0)
		checker = false;
	if (nftw(dir, collect, 32, FTW_PHYS) != 0) {
		fprintf(stderr, "roundtrip: cannot walk %s\n", dir);
		return 1;
	}
	if (npaths == 0) {
		fprintf(stderr, "roundtrip: no model.onnx under %s\n", dir);
		return 1;
	}
	qsort(paths, npaths, sizeof *paths, cmp_str);

	char tmpdir[] = "/tmp/wlower-roundtrip-XXXXXX";
	FILE *list = NULL;
	char listpath[256];
	if (checker) {
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			return 1;
		}
		snprintf(listpath, sizeof listpath, "%s/list.tsv", tmpdir);
		list = fopen(listpath, "w");
		if (!list) {
			perror(listpath);
			return 1;
		}
	}
	int passed = 0, failed = 0, node_total = 0, node_ok = 0;
	for (size_t i = 0; i < npaths; i++) {
		bool is_node = strstr(paths[i], "/node/") != NULL;
		char out[512];
		snprintf(out, sizeof out, "%s/%zu.onnx", tmpdir, i);
		int bad = check_model(paths[i], checker ? out : NULL);
		node_total += is_node;
		if (bad) {
			failed++;
			printf("FAIL %s: %s\n", paths[i], why);
		} else {
			passed++;
			node_ok += is_node;
			if (verbose)
				printf("ok   %s\n", paths[i]);
			if (list)
				fprintf(list, "%s\t%s\n", paths[i], out);
		}
	}
	int checker_fails = 0, accepted = 0;
	if (list) {
		if (fclose(list) != 0)
			return 1;
		checker_fails = run_checker(listpath, &accepted);
		if (checker_fails < 0) {
			printf("onnx.checker: could not run %s (skipped)\n", PYTHON);
			checker_fails = 0;
		} else
			printf("onnx.checker: %d originals accepted, %d of their exports rejected\n",
			       accepted, checker_fails);
		for (size_t i = 0; i < npaths; i++) {
			char out[512];
			snprintf(out, sizeof out, "%s/%zu.onnx", tmpdir, i);
			unlink(out);
		}
		unlink(listpath);
		rmdir(tmpdir);
	}
	printf("node/: %d of %d models import and round-trip\n", node_ok, node_total);
	printf("conformance: %d passed, %d failed\n", passed - checker_fails, failed + checker_fails);
	for (size_t i = 0; i < npaths; i++)
		free(paths[i]);
	free(paths);
	return failed || checker_fails ? 1 : 0;
}
