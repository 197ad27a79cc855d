# vlmc-run links the runtime only, never LLVM or MLIR, and runs the tiny model: checked in every
# build, the runtime-only one (-DVLMC_COMPILER=OFF) included (tests/e2e/runtime_deps.sh);
# vlmc-serve too, where it is built (libmicrohttpd found).
set(vlmc_serve_file "")
if(TARGET vlmc-serve)
  set(vlmc_serve_file $<TARGET_FILE:vlmc-serve>)
endif()
add_test(NAME runtime.deps_and_tiny_run
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/runtime_deps.sh $<TARGET_FILE:vlmc-run>
                 $<TARGET_FILE:vlmc_runtime> ${vlmc_serve_file}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
