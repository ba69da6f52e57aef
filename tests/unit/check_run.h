/* check_run.h — the body of every unit test's main(): add the tests to the
 * test case, the test case to the suite, run it, exit status from the
 * failures. */
#ifndef WLOWER_CHECK_RUN_H
#define WLOWER_CHECK_RUN_H
#include <check.h>
#include <stdlib.h>

/* Adds the tests of a NULL-terminated list to tc. */
static inline void check_add(TCase *tc, const TTest *const *tests)
{
	for (int i = 0; tests[i]; i++)
		tcase_add_test(tc, tests[i]);
}

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
