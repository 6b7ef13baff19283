// Header of inst_filter.cpp: an accessor inlined into its callers (perflow must
// give its own file and line, not those of std::vector's operator[]).
#ifndef PERFLOW_TEST_INST_FILTER_H
#define PERFLOW_TEST_INST_FILTER_H
#include <vector>

struct Field {
    std::vector<double> v;
    explicit Field(int n) : v(n) {}
    inline double &at(int i) { return v[i]; }  // SITE:field_at
};

#endif
