/* cmd_sim.c — wlower sim DIR: build module.cpp against the CCL emulation,
 * run it bit-exactly, report cycles. (Placeholder until the simulator lands.) */
#include <stdio.h>
#include "commands.h"

int cmd_sim(int argc, char **argv)
{
	(void)argc; (void)argv;
	fprintf(stderr, "wlower sim: error: the simulator is not built yet\n");
	return CMD_BAD_INPUT;
}
