! The halo exchange of halo_slow.c in Fortran with `use mpi_f08` (no ierror arguments): module
! procedures (halo_kernels::slow_compute made slow on one rank).
! usage: halo_slow_f08 [iterations] [work] [extra] [slow_rank]
module halo_kernels
  use mpi_f08
  implicit none
  integer, parameter :: n = 2048
contains
  function slow_compute(u, sweeps) result(r) ! SITE:f08_slow_begin
    double precision, intent(in) :: u(0:n+1)
    integer(8), intent(in) :: sweeps
    double precision :: r
    integer(8) :: s
    integer :: i
    r = 0
    do s = 0, sweeps - 1
      do i = 1, n
        r = r + 1.0d0 / (1.0d0 + u(i) * u(i) + dble(s))
      end do
    end do
  end function slow_compute ! SITE:f08_slow_end

  function relax(u, v, sweeps) result(r)
    double precision, intent(in) :: u(0:n+1)
    double precision, intent(inout) :: v(0:n+1)
    integer(8), intent(in) :: sweeps
    double precision :: r
    integer(8) :: s
    r = 0
    do s = 1, sweeps
      v(1:n) = 0.5d0 * u(1:n) + 0.25d0 * (u(0:n-1) + u(2:n+1))
      r = r + sum(v(1:n) - u(1:n))
    end do
  end function relax

  subroutine halo(u, left, right)
    double precision, intent(inout) :: u(0:n+1)
    integer, intent(in) :: left, right
    type(MPI_Request) :: rq(4)
    call MPI_Irecv(u(0), 1, MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, rq(1))
    call MPI_Irecv(u(n+1), 1, MPI_DOUBLE_PRECISION, right, 2, MPI_COMM_WORLD, rq(2))
    call MPI_Isend(u(1), 1, MPI_DOUBLE_PRECISION, left, 2, MPI_COMM_WORLD, rq(3))
    call MPI_Isend(u(n), 1, MPI_DOUBLE_PRECISION, right, 1, MPI_COMM_WORLD, rq(4))
    call MPI_Waitall(4, rq, MPI_STATUSES_IGNORE) ! SITE:f08_waitall
  end subroutine halo
end module halo_kernels

program halo_slow_f08
  use mpi_f08
  use halo_kernels
  implicit none
  double precision :: u(0:n+1), v(0:n+1), res, tot
  integer :: rank, size, iters, slow, left, right, it, i
  integer(8) :: work, extra
  character(len=32) :: arg
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  iters = 10; work = 1000; extra = 40000; slow = size - 1
  if (command_argument_count() >= 1) then; call get_command_argument(1, arg); read(arg, *) iters; end if
  if (command_argument_count() >= 2) then; call get_command_argument(2, arg); read(arg, *) work; end if
  if (command_argument_count() >= 3) then; call get_command_argument(3, arg); read(arg, *) extra; end if
  if (command_argument_count() >= 4) then; call get_command_argument(4, arg); read(arg, *) slow; end if
  left = merge(rank - 1, MPI_PROC_NULL, rank > 0)
  right = merge(rank + 1, MPI_PROC_NULL, rank < size - 1)
  do i = 0, n + 1
    u(i) = dble(rank * n + i) / dble(size * n)
  end do
  v = 0
  tot = 0
  do it = 1, iters
    call halo(u, left, right)
    res = relax(u, v, work)
    if (rank == slow) res = res + 1d-9 * slow_compute(u, extra) ! SITE:f08_slow_call
    call MPI_Allreduce(res, tot, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD) ! SITE:f08_allreduce
  end do
  if (rank == 0) print '(a,i0,a,i0,a,es12.5)', 'halo_slow_f08: ', size, ' ranks, ', iters, ' iterations, residual ', tot
  call MPI_Finalize()
end program halo_slow_f08
