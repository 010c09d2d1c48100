// main() of every test executable: GoogleTest's, except that a run in which every test was
// skipped (GTEST_SKIP: no GPU, too few GPUs) exits with 77, which ctest reports as "skipped"
// (SKIP_RETURN_CODE). A run with one test passed or failed reports as usual, so a skipped test
// never hides the result of the others.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  if (status == 0 && u.successful_test_count() == 0 && u.skipped_test_count() > 0) return 77;
  return status;
}
