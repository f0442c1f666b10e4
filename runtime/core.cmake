# core.cmake: burstrt_core, the part of libburstrt that every backend shares (options,
# errors, watchdog, steps, pools and tensors, trace, data, checkpoints, optimizer loops,
# RNG, rank sets and the reshard plan, argument checks), compiled once as an object
# library whose objects go into each backend's static library (burstrt, burstrt_cuda).
# Included by runtime/CMakeLists.txt, or by runtime/cuda/CMakeLists.txt when that folder
# is built on its own. The includer has found ZLIB and Threads, and sets
# BURSTRT_CORE_MPI to the MPI target to compile against (MPI::MPI_C) or, for the one-rank
# stand-in, BURSTRT_CORE_MPI_INCLUDE to the folder holding its mpi.h.
set(burstrt_core_dir ${CMAKE_CURRENT_LIST_DIR})
set(burstrt_core_sources
  ${burstrt_core_dir}/base.c ${burstrt_core_dir}/core.c ${burstrt_core_dir}/options.c
  ${burstrt_core_dir}/watchdog.c
  ${burstrt_core_dir}/nodes.c
  ${burstrt_core_dir}/tensor.c ${burstrt_core_dir}/trace.c ${burstrt_core_dir}/rankset.c
  ${burstrt_core_dir}/shapes.c ${burstrt_core_dir}/optim.c ${burstrt_core_dir}/rng.c
  ${burstrt_core_dir}/data.c ${burstrt_core_dir}/loader.c ${burstrt_core_dir}/checkpoint.c
  ${burstrt_core_dir}/idle.c ${burstrt_core_dir}/background.c ${burstrt_core_dir}/guard.c
  ${burstrt_core_dir}/loss_scale.c ${burstrt_core_dir}/safetensors.c ${burstrt_core_dir}/npy.c
  ${burstrt_core_dir}/weights.c ${burstrt_core_dir}/image.c ${burstrt_core_dir}/imagefolder.c)
add_library(burstrt_core OBJECT ${burstrt_core_sources})
# Image folders (--data images:DIR): JPEG through libjpeg-turbo's libjpeg API (Debian:
# libjpeg62-turbo-dev), PNG through libpng (libpng-dev); scripts/install-deps installs both.
# Without one, the build goes on with a warning and programs refuse that format, saying
# what to install. BURSTRT_IMAGE_LIBS is what burstc build links programs with.
find_package(JPEG)
find_package(PNG)
set(burstrt_image_libs "")
if(JPEG_FOUND)
  target_compile_definitions(burstrt_core PRIVATE IMG_HAVE_JPEG=1)
  target_include_directories(burstrt_core PRIVATE ${JPEG_INCLUDE_DIRS})
  list(APPEND burstrt_image_libs ${JPEG_LIBRARIES})
else()
  message(WARNING "libjpeg-turbo (jpeglib.h, libjpeg) not found: programs will refuse JPEG "
                  "files (apt-get install libjpeg62-turbo-dev, or scripts/install-deps)")
endif()
if(PNG_FOUND)
  target_compile_definitions(burstrt_core PRIVATE IMG_HAVE_PNG=1)
  target_include_directories(burstrt_core PRIVATE ${PNG_INCLUDE_DIRS})
  list(APPEND burstrt_image_libs ${PNG_LIBRARIES})
else()
  message(WARNING "libpng not found: programs will refuse PNG files (apt-get install libpng-dev, "
                  "or scripts/install-deps)")
endif()
set(BURSTRT_IMAGE_LIBS "${burstrt_image_libs}" CACHE INTERNAL "")
target_include_directories(burstrt_core PUBLIC ${burstrt_core_dir})
# Position-independent, so that either library may also go into a shared object.
set_target_properties(burstrt_core PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_link_libraries(burstrt_core PUBLIC ZLIB::ZLIB Threads::Threads ${burstrt_image_libs})
if(BURSTRT_CORE_MPI)
  target_link_libraries(burstrt_core PUBLIC ${BURSTRT_CORE_MPI})
else()
  target_include_directories(burstrt_core PRIVATE ${BURSTRT_CORE_MPI_INCLUDE})
endif()
