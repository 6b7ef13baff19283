! Ping-pong between ranks 0 and 1 (Fortran, use mpi): ITER round trips of
! NBYTES bytes, tags 10 and 11, as pingpong.c.
program pingpong
  use mpi
  implicit none
  integer :: rank, ierr, i, iter, nbytes, stat(MPI_STATUS_SIZE)
  character(len=32) :: arg
  character, allocatable :: buf(:)
  iter = 10
  nbytes = 1024
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) iter
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) nbytes
  end if
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  allocate (buf(nbytes))
  buf = 'a'
  do i = 1, iter
    if (rank == 0) then
      call MPI_Send(buf, nbytes, MPI_CHARACTER, 1, 10, MPI_COMM_WORLD, ierr) ! SITE:f_ping_send
      call MPI_Recv(buf, nbytes, MPI_CHARACTER, 1, 11, MPI_COMM_WORLD, stat, ierr) ! SITE:f_ping_recv
    else if (rank == 1) then
      call MPI_Recv(buf, nbytes, MPI_CHARACTER, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr) ! SITE:f_pong_recv
      call MPI_Send(buf, nbytes, MPI_CHARACTER, 0, 11, MPI_COMM_WORLD, ierr) ! SITE:f_pong_send
    end if
  end do
  if (rank == 0) print '(a,i0,a,i0,a)', 'pingpong.f90: ', iter, ' round trips of ', nbytes, ' bytes'
  call MPI_Finalize(ierr)
end program pingpong
