// A plugin that cannot be loaded: it needs a symbol nothing defines (dlopen RTLD_NOW fails).
extern "C" int hpctrain_test_symbol_nobody_defines();
extern "C" int call_it() { return hpctrain_test_symbol_nobody_defines(); }
