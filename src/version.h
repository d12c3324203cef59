/* version.h - the luaop release identifiers. */
#ifndef LUAOP_VERSION_H
#define LUAOP_VERSION_H

#define LUAOP_VERSION "0.1.0-dev"

#endif
