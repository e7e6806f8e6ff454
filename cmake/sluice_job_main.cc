// The main() of a job's executable (sluice_add_job): the job's own main() is
// compiled once, as sluice_job_main (-Dmain=sluice_job_main), for both the
// executable and the job library, and must take (int, char**).
int sluice_job_main(int argc, char** argv);

int main(int argc, char** argv) { return sluice_job_main(argc, argv); }
