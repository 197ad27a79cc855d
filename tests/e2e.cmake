# End-to-end tests through the command-line tools (compile, run, diff), as a user runs them.
if(VLMC_COMPILER)
  add_test(NAME e2e.wrong_inverse_sensitivity
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/wrong_inverse.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()
