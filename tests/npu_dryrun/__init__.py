# TEST DOUBLE package: the NPU dry run (stand-ins for CANN, pyACL, torch_npu and its driver); never used outside tests.
