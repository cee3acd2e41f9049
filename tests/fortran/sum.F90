! sum.F90: MPI sums from Fortran, as climate and physics codes write them: real(4), real(8) and
! complex(8) all-reduces, MPI_IN_PLACE, a reduce to the root, nonblocking all-reduces completed
! by MPI_Wait and MPI_Waitall. Built twice: with `use mpi` (sum_mpi) and, with -DUSE_F08, with
! `use mpi_f08` (sum_f08). Each run places the contributions on the ranks in every rotation,
! checks every result against the MPFR oracle (exit 1 on a mismatch), and prints the digest of
! each result on rank 0 ("case NAME DIGEST"), which tests/mpi/mpi_fortran.sh compares across
! allreduce algorithms. An ordinary MPI program: it knows nothing of the shim.
program sum
#ifdef USE_F08
    use mpi_f08
#else
    use mpi
#endif
    use test_data
    implicit none
    integer, parameter :: n = 1000, small = 50, nc = 500
    integer :: ierr, rank, np, rotation, c, i, total
#ifdef USE_F08
    type(MPI_Request) :: request, requests(2)
#else
    integer :: request, requests(2)
#endif
    real(8), asynchronous :: send(n), recv(n), recv2(n)
    real(4) :: send4(n), recv4(n)
    complex(8) :: sendc(nc), recvc(nc)

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
    do rotation = 0, np - 1
        c = held(rank, rotation, np)
        send = [(value64(c, i, np), i = 1, n)]

        call MPI_Allreduce(send, recv, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
        call check64('real(8) MPI_Allreduce ', recv, n, np, 0)
        call report(rank, 'real8', oracle_digest(recv, int(8 * n, 8)))

        call MPI_Allreduce(send, recv, small, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
        call check64('real(8) small MPI_Allreduce ', recv, small, np, 0)

        recv = send
        call MPI_Allreduce(MPI_IN_PLACE, recv, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
        call check64('real(8) MPI_IN_PLACE ', recv, n, np, 0)
        call report(rank, 'real8-in-place', oracle_digest(recv, int(8 * n, 8)))

        recv = 0
        call MPI_Reduce(send, recv, n, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
        if (rank == 0) call check64('real(8) MPI_Reduce ', recv, n, np, 0)

        send4 = [(value32(c, i, np), i = 1, n)]
        call MPI_Allreduce(send4, recv4, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
        call check32('real(4) MPI_Allreduce ', recv4, n, np)
        call report(rank, 'real4', oracle_digest(recv4, int(4 * n, 8)))

        sendc = [(cmplx(value64(c, i, np), value64(c, i + 7, np), 8), i = 1, nc)]
        call MPI_Allreduce(sendc, recvc, nc, MPI_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD, ierr)
        call check64('complex(8) real part ', real(recvc, 8), nc, np, 0)
        call check64('complex(8) imaginary part ', aimag(recvc), nc, np, 7)
        call report(rank, 'complex8', oracle_digest(recvc, int(16 * nc, 8)))

        recv = 0
        call MPI_Iallreduce(send, recv, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, request, ierr)
        call MPI_Wait(request, MPI_STATUS_IGNORE, ierr)
        call check64('real(8) MPI_Iallreduce + MPI_Wait ', recv, n, np, 0)

        recv = 0
        recv2 = 0
        call MPI_Iallreduce(send, recv, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, requests(1), ierr)
        call MPI_Iallreduce(send, recv2, small, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, &
                            requests(2), ierr)
        call MPI_Waitall(2, requests, MPI_STATUSES_IGNORE, ierr)
        call check64('real(8) MPI_Waitall first ', recv, n, np, 0)
        call check64('real(8) MPI_Waitall second ', recv2, small, np, 0)
    end do
    call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (rank == 0) print '(a, i0, a, i0, a)', 'fortran: np=', np, ': ', total, ' wrong results'
    call MPI_Finalize(ierr)
    if (total /= 0) stop 1
end program
