# `burstc plan` errors, through the command: a malformed --profile (every bad
# line, with its number) and a job that cannot fit in memory (the layer and the
# bytes named at the job). Run by ctest with -DBURSTC=... -DSRC=...
function(expect_error args want)
  execute_process(COMMAND ${BURSTC} plan ${args} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 1)
    message(FATAL_ERROR "burstc plan ${args}: exit status ${rc}, expected 1\n${err}")
  endif()
  foreach(w IN LISTS want)
    string(FIND "${err}" "${w}" at)
    if(at LESS 0)
      message(FATAL_ERROR "burstc plan ${args}: expected '${w}' in:\n${err}")
    endif()
  endforeach()
endfunction()

expect_error("--profile;${SRC}/golden/bad_profile.txt;${SRC}/golden/vgg16_8.burst"
  "golden/bad_profile.txt:2: error: unterminated attribute object;golden/bad_profile.txt:4: error: missing the average time (ms)")
expect_error("--batch;100000;${SRC}/golden/vgg16_8.burst"
  "vgg16_8.burst:14:5: error: burst plan: layer 's1.h' needs 160563200000 bytes per GPU")
expect_error("--gpus;0;${SRC}/golden/vgg16_8.burst" "--gpus must be a positive integer")
expect_error("--strategy;fastest;${SRC}/golden/vgg16_8.burst" "unknown strategy 'fastest'")
expect_error("--strategy;deeppool;${SRC}/golden/deeppool_two_heads.burst"
  "deeppool_two_heads.burst:15:5: error: deeppool plan: DeepPool's planner cannot search this graph: the branches of a fork end at different layers (layer 'h')")
