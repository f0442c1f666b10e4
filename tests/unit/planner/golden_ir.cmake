# The golden planned IR: plans golden/vgg16_8.burst (VGG-16 on 8 A100s)
# through the passes up to "comm", compares the IR with golden/vgg16_8.ir,
# then reads that IR back and checks that the same passes leave it unchanged.
# Run by ctest with -DBURSTC=... -DSRC=... -DOUT=...; to accept a new golden:
#   burstc --stop-after=comm golden/vgg16_8.burst -o golden/vgg16_8.ir
execute_process(COMMAND ${BURSTC} --stop-after=comm ${SRC}/golden/vgg16_8.burst -o ${OUT}/vgg16_8.ir
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "burstc failed on golden/vgg16_8.burst (status ${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT}/vgg16_8.ir ${SRC}/golden/vgg16_8.ir RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  execute_process(COMMAND diff -u ${SRC}/golden/vgg16_8.ir ${OUT}/vgg16_8.ir)
  message(FATAL_ERROR "planned IR differs from golden/vgg16_8.ir")
endif()
execute_process(COMMAND ${BURSTC} --stop-after=comm ${OUT}/vgg16_8.ir -o ${OUT}/vgg16_8.again.ir RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "burstc cannot read back its planned IR (status ${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT}/vgg16_8.ir ${OUT}/vgg16_8.again.ir RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the planned IR changed when read back and planned again")
endif()
