// global test setup
