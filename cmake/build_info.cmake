# Writes build_info.h with the current git commit. Run at every build (not only at configure
# time) so `rmt --version` and results.json name the commit that was actually built;
# configure_file leaves the header untouched when nothing changed, so nothing recompiles.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE RMT_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT RMT_GIT_COMMIT)
  set(RMT_GIT_COMMIT "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE dirty)
  if(NOT dirty EQUAL 0)
    set(RMT_GIT_COMMIT "${RMT_GIT_COMMIT}-dirty")
  endif()
endif()
configure_file(${SOURCE_DIR}/lib/build_info.h.in ${OUTPUT} @ONLY)
