// C++ ring: each rank passes a std::vector<double> to its right neighbour
// (tag 9) with MPI_Sendrecv, ITER times, from a namespaced function.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace halo {
template <typename T>
__attribute__((noinline)) double exchange(std::vector<T> &out, std::vector<T> &in, int left, int right) {
    int n = (int)out.size();
    MPI_Sendrecv(out.data(), n, MPI_DOUBLE, right, 9, in.data(), n, MPI_DOUBLE, left, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* SITE:cxx_sendrecv */
    return in[0];
}
}  // namespace halo

int main(int argc, char **argv) {
    int rank, size, iter = argc > 1 ? std::atoi(argv[1]) : 5;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<double> out(100, rank), in(100);
    double s = 0;
    for (int i = 0; i < iter; i++) s += halo::exchange(out, in, (rank + size - 1) % size, (rank + 1) % size);
    if (rank == 0) std::printf("cxx_ring: %d ranks, sum %g\n", size, s);
    MPI_Finalize();
    return 0;
}
