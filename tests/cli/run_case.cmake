# Runs one `tracer` command line and checks its exit status and output.
# -DTRACER=path -DARGS="a;b;c" -DEXPECT_RC=N -DEXPECT=regex [-DREJECT=regex] [-DWORKDIR=dir]
if(NOT WORKDIR)
  set(WORKDIR .)
endif()
# -DINPUT=file feeds the command's stdin (the REPL's piped mode).
if(INPUT)
  execute_process(COMMAND ${TRACER} ${ARGS} WORKING_DIRECTORY ${WORKDIR} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300 INPUT_FILE ${INPUT})
else()
  execute_process(COMMAND ${TRACER} ${ARGS} WORKING_DIRECTORY ${WORKDIR} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
endif()
set(all "${out}${err}")
if(NOT rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT_RC}\n--- output:\n${all}")
endif()
if(EXPECT AND NOT all MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match '${EXPECT}'\n--- output:\n${all}")
endif()
if(REJECT AND all MATCHES "${REJECT}")
  message(FATAL_ERROR "output matches '${REJECT}', which it must not\n--- output:\n${all}")
endif()
message(STATUS "ok: ${all}")
