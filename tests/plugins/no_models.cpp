// A shared library that loads fine but registers no model.
extern "C" int no_models_here() { return 0; }
