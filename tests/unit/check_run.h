/* check_run.h — the end of every unit test's main(): add the test case to
 * the suite, run it, exit status from the failures. */
#ifndef WLOWER_CHECK_RUN_H
#define WLOWER_CHECK_RUN_H
#include <check.h>
#include <stdlib.h>

static inline int check_run(Suite *s, TCase *tc)
{
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
