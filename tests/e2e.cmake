# End-to-end tests through the command-line tools (compile, run, diff), as a user runs them.
if(VLMC_COMPILER)
  add_test(NAME e2e.wrong_inverse_sensitivity
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/wrong_inverse.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# The shapes model end to end (issue 6): compile assets/shapes-vl, describe the bug report's
# image and the 336x336 / 448x672 fixture scenes, and catch the planted wrong-inverse defect.
# Needs numpy, hence Debian's python3.
if(VLMC_COMPILER)
  find_program(VLMC_E2E_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT VLMC_E2E_PYTHON3)
    set(VLMC_E2E_PYTHON3 ${Python3_EXECUTABLE})
  endif()
  add_test(NAME e2e.shapes
           COMMAND ${VLMC_E2E_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/shapes.py
                   $<TARGET_FILE:vlmc> $<TARGET_FILE:vlmc-run>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# vlmc-serve, the OpenAI-compatible HTTP server (issue 20), with the shapes model: answers equal
# vlmc-run's, streaming, concurrent clients, refusals, a bounded soak, SIGTERM. Debian's python3
# (standard library only) and curl.
if(VLMC_COMPILER AND TARGET vlmc-serve)
  add_test(NAME e2e.serve
           COMMAND ${VLMC_E2E_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/serve.py
                   $<TARGET_FILE:vlmc> $<TARGET_FILE:vlmc-serve> $<TARGET_FILE:vlmc-run>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# The artifact and the runtime for users (issue 5): compile -> inspect -> run on the tiny
# checkpoint, inline and --params external; chat and the vlmc-run options with the shapes
# model; vlmc random-checkpoint. (runtime_deps.cmake checks vlmc-run in every build.)
if(VLMC_COMPILER)
  foreach(script artifact_tiny chat_shapes random_checkpoint hostile_kernels)
    add_test(NAME e2e.${script}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/${script}.sh $<TARGET_FILE:vlmc>
                     $<TARGET_FILE:vlmc-run>
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endforeach()
  # vlmc-run's defaults against transformers' generate() under a checkpoint's
  # generation_config.json (issue 20; fixtures from tests/oracle/make_generation_fixtures.py).
  add_test(NAME e2e.generation_defaults
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/generation_defaults.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# Saved kernel-test cases run by the runtime-only vlmc-kernel-check (cpu and vulkan), and its
# refusals of what is not a saved case.
if(VLMC_COMPILER)
  add_test(NAME e2e.kernel_check
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/kernel_check.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-kernel-check>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# Generated cpu and vulkan kernels against the reference executor, one test per
# tests/kernels/*.vir and target (each at sizes 3420, 176, 172, 1, 37 unless the file says
# otherwise).
if(VLMC_COMPILER)
  file(GLOB kernel_tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/kernels/*.vir)
  foreach(src ${kernel_tests})
    get_filename_component(name ${src} NAME_WE)
    add_test(NAME kernel.${name} COMMAND $<TARGET_FILE:vlmc> kernel-test ${src}
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    # The same on the vulkan target and backend (CI: lavapipe). 2000 rather than 3420: lavapipe
    # binds at most 128 MiB per buffer, which the largest transposes at 3420 exceed.
    add_test(NAME kernel.vulkan.${name}
             COMMAND $<TARGET_FILE:vlmc> kernel-test --target vulkan --sizes 2000,176,172,1,37
                     ${src}
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    # The same on the metal target, in the Metal emulation (tests/metal/README.md: the MSL
    # compiled as C++ against a stand-in <metal_stdlib>, every thread a fiber; not Apple
    # hardware). Its kernels are the vulkan target's translated, so the vulkan sizes and
    # directives apply. The compiled kernels are cached by content: the sanitizer stage reuses
    # stage 1's.
    add_test(NAME kernel.metal.${name}
             COMMAND $<TARGET_FILE:vlmc> kernel-test --target metal --sizes 2000,176,172,1,37
                     ${src}
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    # The cpu target's wider kernels (the default above is portable: 4 lanes). avx512: the
    # x86-64-v4 code itself (16 lanes, 32 registers), where the CPU has AVX-512; wide16: the
    # same 16-lane kernel text on AVX2 (vector-width=16, LLVM splits each vector), so that the
    # wide templates' tiles and tails are checked on a CPU without AVX-512 too. Both skip
    # (exit 77, with the reason) where the CPU lacks the flag.
    foreach(level "avx512;avx512f;x86-64-v4" "wide16;avx2;x86-64-v3,vector-width=16")
      list(GET level 0 tag)
      list(GET level 1 flag)
      list(GET level 2 cpu)
      add_test(NAME kernel.${tag}.${name}
               COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/kernel_cpu_level.sh
                       $<TARGET_FILE:vlmc> ${flag} ${cpu} ${src}
               WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
      set_tests_properties(kernel.${tag}.${name} PROPERTIES SKIP_RETURN_CODE 77)
    endforeach()
    # The 8-lane (AVX2) linear kernels: the tile shapes of a 16-register machine at 8 lanes;
    # and the host's own (native), which on a CPU with AVX512_BF16 takes a linear on bf16
    # inputs through vdpbf16ps (linear_bf16_dot*.vir).
    if(name MATCHES "^linear_")
      foreach(level "avx2;avx2;x86-64-v3" "bf16dot;avx512_bf16;native")
        list(GET level 0 tag)
        list(GET level 1 flag)
        list(GET level 2 cpu)
        add_test(NAME kernel.${tag}.${name}
                 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/kernel_cpu_level.sh
                         $<TARGET_FILE:vlmc> ${flag} ${cpu} ${src}
                 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
        set_tests_properties(kernel.${tag}.${name} PROPERTIES SKIP_RETURN_CODE 77)
      endforeach()
    endif()
  endforeach()
endif()

# The tools' command-line conventions (issue 20, tools/cli.h): --version, --name=value, -n5,
# -f FILE / -f -, usage errors that name the option (exit 2), failures (exit 1).
if(VLMC_COMPILER)
  add_test(NAME e2e.cli_conventions
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/cli_conventions.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# The JSON outputs for scripts (issue 20, docs/cli.md): vlmc inspect --json, vlmc diff-taps
# --json and vlmc-run --json, each against what its text form says.
if(VLMC_COMPILER)
  add_test(NAME e2e.json_outputs
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/json_outputs.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# The manual pages (written by the build from each tool's --help) and the bash completion
# (tools/completion.bash): every option in both, subcommands, names and paths completed.
if(VLMC_PYTHON3)
  add_test(NAME e2e.cli_docs
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/cli_docs.sh ${CMAKE_BINARY_DIR}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# The README's plant-a-bug recipe as written, and a reused --dump-dir (issue 20).
if(VLMC_COMPILER)
  add_test(NAME e2e.readme_recipe
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/readme_recipe.sh $<TARGET_FILE:vlmc>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# Bad input gets a clear error, never a crash, a hang or a runaway allocation (issue 12): a
# FIFO and /dev/zero for every file argument of both tools; a config whose sizes the checkpoint
# does not have, NaN / Inf weights, and a long --input-ids list (tests/unit/
# test_artifact_atomic.c and test_model_limits.c check the same in process).
if(VLMC_COMPILER)
  foreach(script special_files bad_inputs)
    add_test(NAME e2e.${script}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/${script}.sh $<TARGET_FILE:vlmc>
                     $<TARGET_FILE:vlmc-run>
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endforeach()
endif()

# f16 precision with calibration through the CLI (issue 13 item 3): the tiny checkpoint with
# its last vision MLP scaled past f16's range (vlmc-test-scale-weights writes it at test time)
# compiled --precision f16 without --calibrate must fail (inf/NaN or other tokens than f32),
# and with --calibrate IMG must print exactly the f32 greedy tokens, upcasting only that MLP.
# The script takes the target and backend, so another target adds one line here.
add_executable(vlmc-test-scale-weights ${CMAKE_CURRENT_SOURCE_DIR}/tools/scale_weights.c)
target_link_libraries(vlmc-test-scale-weights PRIVATE vlmc_frontend vlmc_support)
if(VLMC_COMPILER)
  add_test(NAME e2e.precision_overflow.ref
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/precision_overflow.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run> $<TARGET_FILE:vlmc-test-scale-weights> ref ref
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# The bf16-matmul precision on the cpu backend (linears on bf16-rounded inputs; vdpbf16ps where
# the CPU has AVX512_BF16): against transformers' f32 taps, taps within 1.5e-2 and logits 4e-2,
# about 3x what was measured (worst tap 5.7e-3, image_embeds of wide1024x484; worst logits
# 1.5e-2, img1036): bf16's unit roundoff is 2^-9 = 2e-3 on every linear input; greedy tokens
# identical but where transformers' own top-1 margin is below that (token 12 of wide1024x484,
# margin 3.1e-3, becomes its runner-up: test_compiler_parity.c says how that is judged); and
# against the ref backend on the same artifact (e2e.bf16_matmul).
if(VLMC_COMPILER)
  add_test(NAME parity.cpu_bf16_matmul
           COMMAND test_compiler_parity --target ref,cpu --precision bf16-matmul --backend cpu
                   --target-options cpu=native --tap-tolerance 1.5e-2 --logits-tolerance 4e-2
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME e2e.bf16_matmul
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/bf16_matmul.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# Transformers parity on the cpu backend with the 16-lane (AVX-512-shaped) kernels, written
# for SSE2 so that any x86-64 runs them (LLVM splits each vector): the cpu's f32 tolerances.
if(VLMC_COMPILER)
  add_test(NAME parity.cpu_wide16
           COMMAND test_compiler_parity --target ref,cpu --backend cpu
                   --target-options cpu=portable,vector-width=16
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# The vulkan target and backend (issue 13), on the machine's Vulkan device (CI: lavapipe,
# scripts/install-deps.sh installs mesa-vulkan-drivers). Under ASan, LeakSanitizer is off for
# the tests that open a device: lavapipe's JIT-compiled shaders leak a few blocks whose stacks
# name no library a suppression could match (runtime/backends/vulkan/README.md); ASan and
# UBSan stay on.
# The model-sized vulkan runs below are stage 1's (scripts/test.sh): under the sanitizer
# build, the vulkan backend's code runs through unit.test_vulkan_backend and every
# kernel.vulkan.* case instead (lavapipe takes minutes per model run; the walker and session
# code these runs add is the cpu's, which stage 2 runs through e2e.* and parity).
if(VLMC_COMPILER AND NOT VLMC_SANITIZE)
  # The acceptance command (f32 and f16), inspect, --list-devices, --stats, no silent
  # fallback, damaged SPIR-V, a missing loader.
  add_test(NAME e2e.vulkan
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/vulkan.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # Transformers parity on the vulkan backend: f32 with the cpu's tolerances; f16 with those
  # of docs/vulkan.md ("Precision"), greedy tokens identical either way.
  add_test(NAME parity.vulkan_f32
           COMMAND test_compiler_parity --target ref,vulkan --precision f32 --backend vulkan
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME parity.vulkan_f16
           COMMAND test_compiler_parity --target ref,vulkan --precision f16 --backend vulkan
                   --tap-tolerance 5e-3 --logits-tolerance 1e-2
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # The f16 overflow hazard and its calibration, on vulkan.
  add_test(NAME e2e.precision_overflow.vulkan
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/precision_overflow.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run> $<TARGET_FILE:vlmc-test-scale-weights> vulkan vulkan
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()
if(VLMC_COMPILER)
  set(vlmc_vulkan_device_tests unit.test_vulkan_backend e2e.kernel_check)
  foreach(src ${kernel_tests})
    get_filename_component(name ${src} NAME_WE)
    list(APPEND vlmc_vulkan_device_tests kernel.vulkan.${name})
  endforeach()
  if(VLMC_SANITIZE)
    set_property(TEST ${vlmc_vulkan_device_tests} APPEND PROPERTY ENVIRONMENT
                 "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
  endif()
  # The targets of this build share the reference executor's results of each case
  # (tools/ref_cache.h): computed by the first test of a case, read by the others.
  foreach(src ${kernel_tests})
    get_filename_component(name ${src} NAME_WE)
    foreach(tag "" vulkan. metal. avx512. wide16. avx2. bf16dot.)
      if(TEST kernel.${tag}${name})
        set_property(TEST kernel.${tag}${name} APPEND PROPERTY ENVIRONMENT
                     "VLMC_KERNEL_TEST_REF_CACHE=${CMAKE_BINARY_DIR}/kernel-test-ref-cache")
      endif()
    endforeach()
  endforeach()
endif()

# The metal target through the Metal emulation (tests/metal/README.md; not Apple hardware):
# the acceptance command, inspect, every kernel parsing against the stand-in, the shapes
# model end to end, a planted missing barrier caught (tests/e2e/metal.sh); the golden MSL of
# a few kernels; transformers parity at f16 on the emulated backend (stage 1 only, as the
# vulkan parity runs: the kernels are the same code either way, and stage 2 runs the
# emulated backend's own code through e2e.metal and every kernel.metal.* case).
if(VLMC_COMPILER AND TARGET vlmc-run-metal-emu)
  add_test(NAME e2e.metal
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/metal.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run> $<TARGET_FILE:vlmc-run-metal-emu>
                   $<TARGET_FILE:vlmc-kernel-check> ${VLMC_METAL_CXX}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME e2e.metal_golden
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/metal_golden.sh $<TARGET_FILE:vlmc>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  if(NOT VLMC_SANITIZE)
    add_test(NAME parity.metal_f16
             COMMAND test_compiler_parity --target ref,metal --precision f16 --backend metal
                     --tap-tolerance 5e-3 --logits-tolerance 1e-2
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endif()
endif()

# The demo model on vulkan against the ref backend on all 200 held-out scenes of the evaluation
# stream (training/compare_vlmc.py: transformers' recorded answers, which the ref backend
# matches on 200/200 (training/results/vlmc_agreement.json), and a ref run on every scene where
# vulkan departs from them), f32 and f16; the issue's bar is 198 of 200 each. Two `vlmc-run
# --batch` processes per precision load the artifact once each (lavapipe's JIT and the weights'
# upload are paid twice, not 200 times): about 1.2 s a scene on 2 cores, 4 to 5 minutes per
# precision. COST makes ctest start them first, so that they overlap the rest of the suite
# instead of running alone at its end.
if(VLMC_COMPILER AND NOT VLMC_SANITIZE)
  foreach(precision f32 f16)
    add_test(NAME e2e.shapes_heldout.vulkan_${precision}
             COMMAND ${VLMC_E2E_PYTHON3} ${CMAKE_SOURCE_DIR}/training/compare_vlmc.py
                     --build ${CMAKE_BINARY_DIR} --target vulkan --precision ${precision}
                     --backend vulkan --ref-artifact --n 200 --min-identical-to-ref 198
                     --min-rate 0 --out ${CMAKE_BINARY_DIR}/heldout_vulkan_${precision}.json
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(e2e.shapes_heldout.vulkan_${precision} PROPERTIES COST 10000)
  endforeach()
endif()

# MLX 4-bit checkpoints (docs/mlx_format.md) against the numpy oracle: the tiny checkpoint
# made MLX by tests/oracle/make_mlx_checkpoint.py (group 64; group 32 with embed_tokens and
# the vision tower; 8 bits; tied embeddings) must
# match its --dequantize-to f32 twin (compiled --target ref) to diff-taps' default 1e-4 with
# identical greedy ids, on text_only and img336; malformed MLX checkpoints are refused by
# tensor name. Needs numpy (Debian's python3). ref, cpu (portable) and cpu=native (the host's
# quantized linear kernels) here, with the refusals; the vulkan backend where the model-sized
# vulkan runs are (above).
if(VLMC_COMPILER)
  add_test(NAME e2e.quantized_mlx
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/quantized_mlx.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run> ${VLMC_E2E_PYTHON3} ref,cpu,cpu@native refusals
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()
# The oracle of issue 16: vlmc's 4-bit path (an MLX-format checkpoint as it is, and
# --quantize q4:g64) against transformers run on numpy-dequantized twins
# (tests/oracle/make_quantized_fixtures.py -> tests/fixtures/parity_q4): the twins rebuilt
# here hash as transformers' did, and on ref, cpu and vulkan the greedy ids are transformers'
# and every tap is within 1e-4 (tests/e2e/quantized_oracle.sh; about 20 s). Vulkan outside
# the sanitizer stage, as the other model runs.
if(VLMC_COMPILER)
  if(VLMC_SANITIZE)
    set(quantized_oracle_backends ref,cpu)
  else()
    set(quantized_oracle_backends ref,cpu,vulkan)
  endif()
  add_test(NAME e2e.quantized_oracle
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/quantized_oracle.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run> ${VLMC_E2E_PYTHON3} ${quantized_oracle_backends}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()
# vlmc's own --quantize (docs/quantization.md): the tiny checkpoint at q4 (g64: the down
# projections' K = 176 makes a short last group and a padded word), q4:g32 with
# --quantize-vision and q8, compiled for ref, cpu and vulkan, every backend's taps equal to
# the ref backend's to 1e-4 and its ids identical; inspect's bits per weight, --stats'
# weight bytes, the flags' refusals.
if(VLMC_COMPILER)
  if(VLMC_SANITIZE)
    set(quantize_own_backends ref,cpu) # the model-sized vulkan runs are stage 1's
  else()
    set(quantize_own_backends ref,cpu,vulkan)
  endif()
  add_test(NAME e2e.quantize_own
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/quantize_own.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run> ${quantize_own_backends}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()
# The qwen2_vl family (issue 17) before its transformers fixtures: a tiny random Qwen2-VL
# checkpoint compiles with no flags, its vision tower has LayerNorms, quick_gelu and no windows,
# and cpu (and vulkan outside the sanitizer stage) match the ref backend.
if(VLMC_COMPILER)
  if(VLMC_SANITIZE)
    set(qwen2_vl_backends ref,cpu)
  else()
    set(qwen2_vl_backends ref,cpu,vulkan)
  endif()
  add_test(NAME e2e.qwen2_vl
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/qwen2_vl.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run> ${qwen2_vl_backends}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # The text-only qwen2 family against transformers' text_only parity case (the tiny
  # checkpoint's weights: Qwen2.5-VL on a prompt without images is Qwen2).
  # The qwen3_vl family (issue 17) before its transformers fixtures: a tiny random Qwen3-VL
  # compiles with no flags (learned positions, deepstack, interleaved M-RoPE), its backends
  # match ref on one image, two images and text only, and the sectioned layout is caught.
  add_test(NAME e2e.qwen3_vl
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/qwen3_vl.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run> ${qwen2_vl_backends}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # Each new family against transformers' fixtures (tests/oracle/make_family_fixtures.py):
  # skipped, by name, until the device machine has made them.
  foreach(family qwen2_vl qwen3_vl)
    add_test(NAME e2e.family_parity.${family}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/family_parity.sh ${family}
                     $<TARGET_FILE:vlmc> $<TARGET_FILE:vlmc-run> ${qwen2_vl_backends}
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(e2e.family_parity.${family} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
  add_test(NAME e2e.qwen2_text
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/qwen2_text.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run> ${qwen2_vl_backends}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()
if(VLMC_COMPILER AND NOT VLMC_SANITIZE)
  add_test(NAME e2e.quantized_mlx.vulkan
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/quantized_mlx.sh $<TARGET_FILE:vlmc>
                   $<TARGET_FILE:vlmc-run> ${VLMC_E2E_PYTHON3} vulkan
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()
