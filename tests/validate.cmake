# The validation at open (tests/unit/test_compiler_runtime_validate.c) refuses planted
# artifacts through the session and through `vlmc inspect --verify`: it runs the vlmc binary.
if(VLMC_COMPILER AND TARGET test_compiler_runtime_validate)
  set_tests_properties(unit.test_compiler_runtime_validate PROPERTIES
                       ENVIRONMENT "VLMC_BIN=$<TARGET_FILE:vlmc>")
endif()
