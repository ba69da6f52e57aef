/* main.c — the wlower command: one table of commands. `wlower MODEL ...`
 * (no command name) compiles (cmd_compile.c); every other command has its
 * own file cmd_NAME.c. Only the driver (this folder) prints diagnostics and
 * exits. Before any command: the signal handlers that remove temporaries
 * (compiler/ir/fileutil.h cleanup_signals_install; SIGPIPE ignored). After
 * it: stdout must have been written in full, else one line and exit 1
 * (EPIPE when the reader went away, ENOSPC on /dev/full). */
#include <string.h>
#include "compiler/driver/commands.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{"run", cmd_run},
	{"calibrate", cmd_calibrate},
	{"quantize", cmd_quantize},
	{"sim", cmd_sim},
	{"generate", cmd_generate},
	{"tokenize", cmd_tokenize},
	{"compare", cmd_compare},
	{"sweep", cmd_sweep},
	{"transcribe", cmd_transcribe},
};

static int finish(const char *cmd, int rc)
{
	Diag d = {0};
	if (stdout_check(&d) != WL_OK) {
		if (rc == CMD_OK)
			rc = cmd_error(cmd, &d);
		else if (rc != CMD_USAGE)
			rc = CMD_BAD_INPUT;
	}
	return rc;
}

int main(int argc, char **argv)
{
	cleanup_signals_install();
	if (argc >= 2)
		for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
			if (strcmp(argv[1], commands[k].name) == 0)
				return finish(commands[k].name, commands[k].fn(argc - 1, argv + 1));
	return finish(NULL, cmd_compile(argc, argv));
}
