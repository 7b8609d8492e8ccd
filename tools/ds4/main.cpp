// STUB main until the CLI lands.
#include <cstdio>
int main() { std::puts("ds4"); return 0; }
