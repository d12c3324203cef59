module luaop.local/chaos

go 1.22
