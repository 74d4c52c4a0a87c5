# TEST DOUBLE for the NPU dry run: never used outside tests.
