#pragma once
// Catch2 for test files that also see LibTorch headers: include this first, instead of
// <catch2/catch.hpp>. c10's logging header defines CHECK as a fatal log, and whichever
// definition comes last wins, so a Catch CHECK could silently turn into c10's (counting
// nothing, aborting on failure). Here c10's comes first and is removed before Catch's.
#include <c10/util/Logging.h>
#undef CHECK
#include <catch2/catch.hpp>
