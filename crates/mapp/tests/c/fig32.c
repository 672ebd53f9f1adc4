/* A 004 Fig. 3.2-like OpenMP program: three large arrays (vel, vxy, tem) and a small one (xux). */
#include <stdio.h>

#define NX 512
#define NY 512
#define NZ 16

static double vel[NX][NY];
double vxy[NX * NY], xux[64];
static float tem[NZ][NX][NY];

int main(void)
{
    int i, j, k;
    double sum = 0.0;

#pragma omp parallel for private(j)
    for (i = 0; i < NX; i++)
        for (j = 0; j < NY; j++) {
            vel[i][j] = (double)(i * NY + j) * 0.5;
            vxy[i * NY + j] = (double)(i - j);
        }
    for (i = 0; i < 64; i++)
        xux[i] = i * 0.25;
#pragma omp parallel for private(j, i)
    for (k = 0; k < NZ; k++)
        for (i = 0; i < NX; i++)
            for (j = 0; j < NY; j++)
                tem[k][i][j] = (float)(vel[i][j] + vxy[i * NY + j] * k + xux[(i + j + k) % 64]);
#pragma omp parallel for reduction(+ : sum) private(j, i)
    for (k = 0; k < NZ; k++)
        for (i = 0; i < NX; i++)
            for (j = 0; j < NY; j++)
                sum += tem[k][i][j] * 1e-3;
    printf("sum %.6f vel %.3f vxy %.3f tem %.3f xux %.3f\n", sum, vel[NX - 1][NY - 1],
           vxy[12345], (double)tem[NZ - 1][7][9], xux[63]);
    return 0;
}
