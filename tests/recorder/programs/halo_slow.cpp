// The halo exchange of halo_slow.c in C++, built with -O3 so that the
// compiler inlines: Grid::slow_compute() is inlined into Grid::step(), and
// the symbolizer must give the inline chain main -> Grid::step ->
// Grid::slow_compute with slow_compute's own file and line.
//
// usage: halo_slow_cpp [iterations] [work] [extra] [slow_rank]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace halo {

class Grid {
  public:
    explicit Grid(int rank, int size) : u_(kN + 2), v_(kN + 2), rank_(rank), size_(size) {
        for (int i = 0; i <= kN + 1; i++) u_[i] = double(rank * kN + i) / (size * kN);
    }

    void exchange() {
        int left = rank_ > 0 ? rank_ - 1 : MPI_PROC_NULL, right = rank_ < size_ - 1 ? rank_ + 1 : MPI_PROC_NULL;
        MPI_Request rq[4];
        MPI_Irecv(&u_[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(&u_[kN + 1], 1, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &rq[1]);
        MPI_Isend(&u_[1], 1, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &rq[2]);
        MPI_Isend(&u_[kN], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &rq[3]);
        MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);  // SITE:cpp_waitall
    }

    inline double relax(long sweeps) {
        double r = 0;
        for (long s = 0; s < sweeps; s++) {
            for (int i = 1; i <= kN; i++) v_[i] = 0.5 * u_[i] + 0.25 * (u_[i - 1] + u_[i + 1]);
            for (int i = 1; i <= kN; i++) r += v_[i] - u_[i];
        }
        return r;
    }

    inline double slow_compute(long sweeps) {  // SITE:cpp_slow_begin
        double r = 0;
        for (long s = 0; s < sweeps; s++)
            for (int i = 1; i <= kN; i++) r += 1.0 / (1.0 + u_[i] * u_[i] + double(s));
        return r;
    }  // SITE:cpp_slow_end

    __attribute__((noinline)) double step(long work, long extra, bool slow) {
        exchange();
        double r = relax(work);
        if (slow) r += 1e-9 * slow_compute(extra);  // SITE:cpp_slow_call
        return r;
    }

  private:
    static constexpr int kN = 2048;
    std::vector<double> u_, v_;
    int rank_, size_;
};

}  // namespace halo

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? std::atoi(argv[1]) : 10;
    long work = argc > 2 ? std::atol(argv[2]) : 1000, extra = argc > 3 ? std::atol(argv[3]) : 40000;
    int slow = argc > 4 ? std::atoi(argv[4]) : size - 1;
    halo::Grid grid(rank, size);
    double res = 0, tot = 0;
    for (int it = 0; it < iters; it++) {
        res = grid.step(work, extra, rank == slow);
        MPI_Allreduce(&res, &tot, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);  // SITE:cpp_allreduce
    }
    if (rank == 0) std::printf("halo_slow_cpp: %d ranks, %d iterations, residual %.6e\n", size, iters, tot);
    MPI_Finalize();
    return 0;
}
