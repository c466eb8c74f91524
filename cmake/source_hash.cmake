# source_hash.cmake: write a header with the SHA-256 of the kernel sources, so event logs and
# profiles record which kernels produced their numbers (a changed kernel makes old results
# incompatible). Run at build time: cmake -DOUT=... -DSRC=... -P source_hash.cmake
file(GLOB_RECURSE files RELATIVE ${SRC} ${SRC}/kernels/*.c ${SRC}/kernels/*.h ${SRC}/kernels/*.cu
     ${SRC}/kernels/*.cuh)
list(SORT files)
set(all "")
foreach(f ${files})
  file(SHA256 ${SRC}/${f} h)
  string(APPEND all "${f} ${h}\n")
endforeach()
string(SHA256 hash "${all}")
string(SUBSTRING ${hash} 0 16 short)
set(content "/* Generated at build time: hash of the kernel sources. */\n#define FT_SOURCE_HASH \"${short}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
else()
  set(old "")
endif()
if(NOT old STREQUAL content)
  file(WRITE ${OUT} "${content}")
endif()
