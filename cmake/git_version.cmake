# git_version.cmake: write include/flaretune/version.h with the source tree's `git describe`,
# run at every build (cmake -P), so the version a binary reports and records in profiles and
# event logs is the tree it was built from, not the one it was configured from. The file is
# rewritten only when its text changes, so an unchanged tree rebuilds nothing.
#   cmake -DSRC=<source dir> -DIN=<version.h.in> -DOUT=<version.h> -DPROJECT_VERSION=<x.y.z>
#         -P git_version.cmake
execute_process(COMMAND git describe --always --dirty --tags
                WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE FT_GIT_DESCRIBE OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET)
if(NOT FT_GIT_DESCRIBE)
  set(FT_GIT_DESCRIBE "unknown")
endif()
configure_file(${IN} ${OUT}.new @ONLY)
file(COPY_FILE ${OUT}.new ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.new)
