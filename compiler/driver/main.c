/* main.c — the wlower command: one table of commands. `wlower MODEL ...`
 * (no command name) compiles (cmd_compile.c); every other command has its
 * own file cmd_NAME.c. Only the driver (this folder) prints diagnostics and
 * exits. */
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
};

int main(int argc, char **argv)
{
	if (argc >= 2)
		for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
			if (strcmp(argv[1], commands[k].name) == 0)
				return commands[k].fn(argc - 1, argv + 1);
	return cmd_compile(argc, argv);
}
