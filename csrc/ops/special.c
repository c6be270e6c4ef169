/* The special functions, in one place: those of the unary, binary and pointwise families (i0e,
 * erfcx, log_ndtr, digamma, zeta, polygamma; declared in families.h), and the special family's
 * torch.special functions with no chlo counterpart: the Bessel functions J0, J1, Y0, Y1, the
 * modified ones I0, I1, K0, K1 (and K0, K1 scaled by e^x), spherical j0 and Airy Ai, the
 * classical orthogonal polynomials P_n(x): Chebyshev T, U, V, W and their shifted forms, Hermite
 * H and He, Laguerre L, Legendre P, and the regularized incomplete gamma functions igamma and
 * igammac. Each follows its CPU kernel in ATen's Math.h step by step: the same Cephes
 * coefficients, branch points, special cases, iteration counts and stopping tests, and order of
 * operations, so results agree to rounding. The polynomials' three-term recurrences and igamma's
 * series and continued fraction run in stablehlo.while loops for as long as some element still
 * needs a step, each element keeping its value once done. Integer and bool inputs compute in
 * float32 (igamma has no integer kernel); 16-bit floats fall back where CPU has no kernel for
 * them, so CPU raises its own error (igamma computes them in float32). Depends on ops/ helpers
 * and hlo/ only. */
#include <float.h>

#include "ops/families.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Cephes' polevl: c[0] z^(n-1) + ... + c[n-1], by Horner. */
static tp_hlo_value_t polevl(tp_hlo_builder_t *b, tp_hlo_value_t z, const double *c, int n) {
  tp_hlo_value_t acc = tp_k(b, c[0], z);
  for (int i = 1; i < n; i++) acc = tp_add(b, tp_mul(b, acc, z), tp_k(b, c[i], z));
  return acc;
}

/* Cephes' chbevl as Math.h unrolls it: the Chebyshev series in y, returned as 0.5 * (a - p). */
static tp_hlo_value_t chbevl(tp_hlo_builder_t *b, tp_hlo_value_t y, const double *c, int n) {
  tp_hlo_value_t p = tp_k(b, 0, y), q = p, a = tp_k(b, c[0], y);
  for (int i = 1; i < n; i++) {
    p = q;
    q = a;
    a = tp_add(b, tp_sub(b, tp_mul(b, y, q), p), tp_k(b, c[i], y));
  }
  return tp_mul(b, tp_k(b, 0.5, y), tp_sub(b, a, p));
}

/* ---- Bessel functions of the first and second kind ---- */

static const double kJ0PP[] = {7.96936729297347051624e-04, 8.28352392107440799803e-02,
                               1.23953371646414299388e+00, 5.44725003058768775090e+00,
                               8.74716500199817011941e+00, 5.30324038235394892183e+00,
                               9.99999999999999997821e-01};
static const double kJ0PQ[] = {9.24408810558863637013e-04, 8.56288474354474431428e-02,
                               1.25352743901058953537e+00, 5.47097740330417105182e+00,
                               8.76190883237069594232e+00, 5.30605288235394617618e+00,
                               1.00000000000000000218e+00};
static const double kJ0QP[] = {-1.13663838898469149931e-02, -1.28252718670509318512e+00,
                               -1.95539544257735972385e+01, -9.32060152123768231369e+01,
                               -1.77681167980488050595e+02, -1.47077505154951170175e+02,
                               -5.14105326766599330220e+01, -6.05014350600728481186e+00};
static const double kJ0QQ[] = {6.43178256118178023184e+01, 8.56430025976980587198e+02,
                               3.88240183605401609683e+03, 7.24046774195652478189e+03,
                               5.93072701187316984827e+03, 2.06209331660327847417e+03,
                               2.42005740240291393179e+02};
static const double kJ0RP[] = {-4.79443220978201773821e+09, 1.95617491946556577543e+12,
                               -2.49248344360967716204e+14, 9.70862251047306323952e+15};
static const double kJ0RQ[] = {4.99563147152651017219e+02, 1.73785401676374683123e+05,
                               4.84409658339962045305e+07, 1.11855537045356834862e+10,
                               2.11277520115489217587e+12, 3.10518229857422583814e+14,
                               3.18121955943204943306e+16, 1.71086294081043136091e+18};
static const double kY0YP[] = {1.55924367855235737965e+04, -1.46639295903971606143e+07,
                               5.43526477051876500413e+09, -9.82136065717911466409e+11,
                               8.75906394395366999549e+13, -3.46628303384729719441e+15,
                               4.42733268572569800351e+16, -1.84950800436986690637e+16};
static const double kY0YQ[] = {1.04128353664259848412e+03, 6.26107330137134956842e+05,
                               2.68919633393814121987e+08, 8.64002487103935000337e+10,
                               2.02979612750105546709e+13, 3.17157752842975028269e+15,
                               2.50596256172653059228e+17};
static const double kJ1PP[] = {7.62125616208173112003e-04, 7.31397056940917570436e-02,
                               1.12719608129684925192e+00, 5.11207951146807644818e+00,
                               8.42404590141772420927e+00, 5.21451598682361504063e+00,
                               1.00000000000000000254e+00};
static const double kJ1PQ[] = {5.71323128072548699714e-04, 6.88455908754495404082e-02,
                               1.10514232634061696926e+00, 5.07386386128601488557e+00,
                               8.39985554327604159757e+00, 5.20982848682361821619e+00,
                               9.99999999999999997461e-01};
static const double kJ1QP[] = {5.10862594750176621635e-02, 4.98213872951233449420e+00,
                               7.58238284132545283818e+01, 3.66779609360150777800e+02,
                               7.10856304998926107277e+02, 5.97489612400613639965e+02,
                               2.11688757100572135698e+02, 2.52070205858023719784e+01};
static const double kJ1QQ[] = {7.42373277035675149943e+01, 1.05644886038262816351e+03,
                               4.98641058337653607651e+03, 9.56231892404756170795e+03,
                               7.99704160447350683650e+03, 2.82619278517639096600e+03,
                               3.36093607810698293419e+02};
static const double kJ1RP[] = {-8.99971225705559398224e+08, 4.52228297998194034323e+11,
                               -7.27494245221818276015e+13, 3.68295732863852883286e+15};
static const double kJ1RQ[] = {6.20836478118054335476e+02, 2.56987256757748830383e+05,
                               8.35146791431949253037e+07, 2.21511595479792499675e+10,
                               4.74914122079991414898e+12, 7.84369607876235854894e+14,
                               8.95222336184627338078e+16, 5.32278620332680085395e+18};
static const double kY1YP[] = {1.26320474790178026440e+09, -6.47355876379160291031e+11,
                               1.14509511541823727583e+14, -8.12770255501325109621e+15,
                               2.02439475713594898196e+17, -7.78877196265950026825e+17};
static const double kY1YQ[] = {5.94301592346128195359e+02, 2.35564092943068577943e+05,
                               7.34811944459721705660e+07, 1.87601316108706159478e+10,
                               3.88231277496238566008e+12, 6.20557727146953693363e+14,
                               6.87141087355300489866e+16, 3.97270608116560655612e+18};

#define SQRT_2_OVER_PI 0.797884560802865355879892119868763737
#define TWO_OVER_PI 0.636619772367581343075535053490057448

/* The asymptotic form above 5 that J and Y of one order share: with P = pp/pq, Q = qp/qq in w,
 * J = (P cos(x - phase) - 5/x Q sin(x - phase)) sqrt(2/pi) / sqrt(x) and Y the same with sin and
 * cos exchanged and a plus. Order 0 takes w = 25 / x^2, order 1 (5/x)^2, as the kernels do. */
static tp_hlo_value_t bessel_asymptotic(tp_hlo_builder_t *b, tp_hlo_value_t x, int order, bool second_kind) {
  tp_hlo_value_t w = order == 0 ? tp_div(b, tp_k(b, 25, x), tp_mul(b, x, x))
                       : tp_mul(b, tp_div(b, tp_k(b, 5, x), x), tp_div(b, tp_k(b, 5, x), x));
  tp_hlo_value_t pp = polevl(b, w, order ? kJ1PP : kJ0PP, 7), pq = polevl(b, w, order ? kJ1PQ : kJ0PQ, 7);
  tp_hlo_value_t qp = polevl(b, w, order ? kJ1QP : kJ0QP, 8), qq = polevl(b, w, order ? kJ1QQ : kJ0QQ, 7);
  tp_hlo_value_t ph = tp_sub(b, x, tp_k(b, order ? 2.356194490192344928846982537459627163
                                  : 0.785398163397448309615660845819875721, x));
  tp_hlo_value_t s = tp_un(b, TP_HLO_SIN, ph), c = tp_un(b, TP_HLO_COS, ph);
  tp_hlo_value_t lead = tp_mul(b, tp_div(b, pp, pq), second_kind ? s : c);
  tp_hlo_value_t tail = tp_mul(b, tp_mul(b, tp_div(b, tp_k(b, 5, x), x), tp_div(b, qp, qq)), second_kind ? c : s);
  tp_hlo_value_t r = second_kind ? tp_add(b, lead, tail) : tp_sub(b, lead, tail);
  return tp_div(b, tp_mul(b, r, tp_k(b, SQRT_2_OVER_PI, x)), tp_un(b, TP_HLO_SQRT, x));
}

/* J0 of |x| >= 0 (the caller takes |x|). */
static tp_hlo_value_t bessel_j0_abs(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  tp_hlo_value_t z = tp_mul(b, x, x);
  tp_hlo_value_t rat = tp_div(b, tp_mul(b, tp_mul(b, tp_sub(b, z, tp_k(b, 5.78318596294678452118e+00, x)),
                                tp_sub(b, z, tp_k(b, 3.04712623436620863991e+01, x))),
                         polevl(b, z, kJ0RP, N_OF(kJ0RP))),
                  polevl(b, z, kJ0RQ, N_OF(kJ0RQ)));
  tp_hlo_value_t tiny = tp_sub(b, tp_k(b, 1, x), tp_div(b, z, tp_k(b, 4, x)));
  tp_hlo_value_t small = tp_sel(b, tp_cmpk(b, TP_CMP_LT, x, 0.00001), tiny, rat);
  return tp_sel(b, tp_cmpk(b, TP_CMP_LE, x, 5), small, bessel_asymptotic(b, x, 0, false));
}

/* J1 of x >= 0. */
static tp_hlo_value_t bessel_j1_pos(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  tp_hlo_value_t z = tp_mul(b, x, x);
  tp_hlo_value_t rat = tp_div(b, polevl(b, z, kJ1RP, N_OF(kJ1RP)), polevl(b, z, kJ1RQ, N_OF(kJ1RQ)));
  tp_hlo_value_t small = tp_mul(b, tp_mul(b, tp_mul(b, rat, x), tp_sub(b, z, tp_k(b, 1.46819706421238932572e+01, x))),
                    tp_sub(b, z, tp_k(b, 4.92184563216946036703e+01, x)));
  return tp_sel(b, tp_cmpk(b, TP_CMP_LE, x, 5), small, bessel_asymptotic(b, x, 1, false));
}

static tp_hlo_value_t bessel_j1(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  tp_hlo_value_t r = bessel_j1_pos(b, tp_un(b, TP_HLO_ABS, x));
  return tp_sel(b, tp_cmpk(b, TP_CMP_LT, x, 0), tp_un(b, TP_HLO_NEG, r), r);
}

/* Y0, Y1: -inf at 0, NaN below. */
static tp_hlo_value_t bessel_y(tp_hlo_builder_t *b, tp_hlo_value_t x, int order) {
  tp_hlo_value_t z = tp_mul(b, x, x), small;
  if (order == 0) {
    tp_hlo_value_t rat = tp_div(b, polevl(b, z, kY0YP, N_OF(kY0YP)), polevl(b, z, kY0YQ, N_OF(kY0YQ)));
    small = tp_add(b, rat, tp_mul(b, tp_mul(b, tp_k(b, TWO_OVER_PI, x), tp_un(b, TP_HLO_LOG, x)),
                            bessel_j0_abs(b, x)));
  } else {
    tp_hlo_value_t rat = tp_div(b, polevl(b, z, kY1YP, N_OF(kY1YP)), polevl(b, z, kY1YQ, N_OF(kY1YQ)));
    tp_hlo_value_t j = tp_sub(b, tp_mul(b, bessel_j1_pos(b, x), tp_un(b, TP_HLO_LOG, x)), tp_div(b, tp_k(b, 1, x), x));
    small = tp_add(b, tp_mul(b, x, rat), tp_mul(b, tp_k(b, TWO_OVER_PI, x), j));
  }
  small = tp_sel(b, tp_cmpk(b, TP_CMP_LT, x, 0), tp_k(b, __builtin_nan(""), x), small);
  small = tp_sel(b, tp_cmpk(b, TP_CMP_EQ, x, 0), tp_k(b, -__builtin_inf(), x), small);
  return tp_sel(b, tp_cmpk(b, TP_CMP_LE, x, 5), small, bessel_asymptotic(b, x, order, true));
}

/* ---- modified Bessel functions ---- */

static const double kI0A[] = {
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15,  -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11,  -5.18979560163526290666e-10, 2.65982372468238665035e-09,
    -1.30002500998624804212e-08, 6.04699502254191894932e-08, -2.67079385394061173391e-07,
    1.11738753912010371815e-06,  -4.41673835845875056359e-06, 1.64484480707288970893e-05,
    -5.75419501008210370398e-05, 1.88502885095841655729e-04, -5.76375574538582365885e-04,
    1.63947561694133579842e-03,  -4.32430999505057594430e-03, 1.05464603945949983183e-02,
    -2.37374148058994688156e-02, 4.93052842396707084878e-02, -9.49010970480476444210e-02,
    1.71620901522208775349e-01,  -3.04682672343198398683e-01, 6.76795274409476084995e-01};
static const double kI0B[] = {
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17,  -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15,  3.81168066935262242075e-15,  -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14,  3.85277838274214270114e-13,
    7.18012445138366623367e-13,  -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11,  4.94060238822496958910e-10,
    3.39623202570838634515e-09,  2.26666899049817806459e-08,  2.04891858946906374183e-07,
    2.89137052083475648297e-06,  6.88975834691682398426e-05,  3.36911647825569408990e-03,
    8.04490411014108831608e-01};
static const double kI1A[] = {
    2.77791411276104639959e-18,  -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15,  -5.04218550472791168711e-14,
    3.22379336594557470981e-13,  -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10,  -1.88724975172282928790e-09,
    9.38153738649577178388e-09,  -4.44505912879632808065e-08, 2.00329475355213526229e-07,
    -8.56872026469545474066e-07, 3.47025130813767847674e-06,  -1.32731636560394358279e-05,
    4.78156510755005422638e-05,  -1.61760815825896745588e-04, 5.12285956168575772895e-04,
    -1.51357245063125314899e-03, 4.15642294431288815669e-03,  -1.05640848946261981558e-02,
    2.47264490306265168283e-02,  -5.29459812080949914269e-02, 1.02643658689847095384e-01,
    -1.76416518357834055153e-01, 2.52587186443633654823e-01};
static const double kI1B[] = {
    7.51729631084210481353e-18,  4.41434832307170791151e-18,  -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16,  3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14,  -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12,  1.41258074366137813316e-11,
    3.25260358301548823856e-11,  -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-09, -2.63146884688951950684e-08, -2.51223623787020892529e-07,
    -3.88256480887769039346e-06, -1.10588938762623716291e-04, -9.76109749136146840777e-03,
    7.78576235018280120474e-01};
static const double kK0A[] = {
    1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
    1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
    1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
    -5.35327393233902768720e-01};
static const double kK0B[] = {
    5.30043377268626276149e-18,  -1.64758043015242134646e-17, 5.21039150503902756861e-17,
    -1.67823109680541210385e-16, 5.51205597852431940784e-16,  -1.84859337734377901440e-15,
    6.34007647740507060557e-15,  -2.22751332699166985548e-14, 8.03289077536357521100e-14,
    -2.98009692317273043925e-13, 1.14034058820847496303e-12,  -4.51459788337394416547e-12,
    1.85594911495471785253e-11,  -7.95748924447710747776e-11, 3.57739728140030116597e-10,
    -1.69753450938905987466e-09, 8.57403401741422608519e-09,  -4.66048989768794782956e-08,
    2.76681363944501510342e-07,  -1.83175552271911948767e-06, 1.39498137188764993662e-05,
    -1.28495495816278026384e-04, 1.56988388573005337491e-03,  -3.14481013119645005427e-02,
    2.44030308206595545468e+00};
static const double kK1A[] = {
    -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
    -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
    -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
    -3.53155960776544875667e-01, 1.52530022733894777053e+00};
static const double kK1B[] = {
    -5.75674448366501715755e-18, 1.79405087314755922667e-17,  -5.68946255844285935196e-17,
    1.83809354436663880070e-16,  -6.05704724837331885336e-16, 2.03870316562433424052e-15,
    -7.01983709041831346144e-15, 2.47715442448130437068e-14,  -8.97670518232499435011e-14,
    3.34841966607842919884e-13,  -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11,  -4.19035475934189648750e-10,
    2.01504975519703286596e-09,  -1.03457624656780970260e-08, 5.74108412545004946722e-08,
    -3.50196060308781257119e-07, 2.40648494783721712015e-06,  -1.93619797416608296024e-05,
    1.95215518471351631108e-04,  -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e+00};

/* I0 and I1: up to |x| = 8 the series in |x|/2 - 2, beyond it the one in 32/|x| - 2. */
static tp_hlo_value_t modified_bessel_i(tp_hlo_builder_t *b, tp_hlo_value_t x, int order) {
  tp_hlo_value_t a = tp_un(b, TP_HLO_ABS, x), e = tp_un(b, TP_HLO_EXP, a);
  tp_hlo_value_t ys = tp_sub(b, tp_div(b, a, tp_k(b, 2, x)), tp_k(b, 2, x));
  tp_hlo_value_t yl = tp_sub(b, tp_div(b, tp_k(b, 32, x), a), tp_k(b, 2, x));
  tp_hlo_value_t small, large = tp_div(b, tp_mul(b, e, chbevl(b, yl, order ? kI1B : kI0B, 25)),
                           tp_un(b, TP_HLO_SQRT, a));
  if (order == 0) {
    small = tp_mul(b, e, chbevl(b, ys, kI0A, N_OF(kI0A)));
  } else {
    small = tp_mul(b, tp_mul(b, chbevl(b, ys, kI1A, N_OF(kI1A)), a), e);
  }
  tp_hlo_value_t r = tp_sel(b, tp_cmpk(b, TP_CMP_LE, a, 8), small, large);
  return order ? tp_sel(b, tp_cmpk(b, TP_CMP_LT, x, 0), tp_un(b, TP_HLO_NEG, r), r) : r;
}

/* K0 and K1, times e^x when |scaled|: up to 2 the series in x^2 - 2 with the log(x/2) I term,
 * beyond it the one in 8/x - 2. inf at 0, NaN below. */
static tp_hlo_value_t modified_bessel_k(tp_hlo_builder_t *b, tp_hlo_value_t x, int order, bool scaled) {
  tp_hlo_value_t ys = tp_sub(b, tp_mul(b, x, x), tp_k(b, 2, x));
  tp_hlo_value_t yl = tp_sub(b, tp_div(b, tp_k(b, 8, x), x), tp_k(b, 2, x));
  tp_hlo_value_t lg = tp_un(b, TP_HLO_LOG, tp_mul(b, tp_k(b, 0.5, x), x));
  tp_hlo_value_t small, large = tp_div(b, chbevl(b, yl, order ? kK1B : kK0B, 25), tp_un(b, TP_HLO_SQRT, x));
  if (order == 0)
    small = tp_sub(b, chbevl(b, ys, kK0A, N_OF(kK0A)), tp_mul(b, lg, modified_bessel_i(b, x, 0)));
  else
    small = tp_add(b, tp_mul(b, lg, modified_bessel_i(b, x, 1)), tp_div(b, chbevl(b, ys, kK1A, N_OF(kK1A)), x));
  if (scaled) {
    small = tp_mul(b, small, tp_un(b, TP_HLO_EXP, x));
  } else {
    /* exp(-x) * (0.5 * (b - p)) / sqrt(x): the chbevl value times e^-x, then divided. */
    large = tp_div(b, tp_mul(b, tp_un(b, TP_HLO_EXP, tp_un(b, TP_HLO_NEG, x)), chbevl(b, yl, order ? kK1B : kK0B, 25)),
                tp_un(b, TP_HLO_SQRT, x));
  }
  tp_hlo_value_t r = tp_sel(b, tp_cmpk(b, TP_CMP_LE, x, 2), small, large);
  r = tp_sel(b, tp_cmpk(b, TP_CMP_LT, x, 0), tp_k(b, __builtin_nan(""), x), r);
  return tp_sel(b, tp_cmpk(b, TP_CMP_EQ, x, 0), tp_k(b, __builtin_inf(), x), r);
}

/* ---- spherical j0 and Airy Ai ---- */

static tp_hlo_value_t spherical_bessel_j0(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  static const double c[] = {1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0,
                             -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0, 1.0};
  tp_hlo_value_t z = tp_mul(b, x, x), s = tp_k(b, c[0], x);
  for (int i = 1; i < N_OF(c); i++) s = tp_add(b, tp_k(b, c[i], x), tp_mul(b, z, s));
  tp_hlo_value_t r = tp_sel(b, tp_cmpk(b, TP_CMP_LT, tp_un(b, TP_HLO_ABS, x), 0.5), s,
                tp_div(b, tp_un(b, TP_HLO_SIN, x), x));
  return tp_sel(b, tp_un(b, TP_HLO_IS_INF, x), tp_k(b, 0, x), r);
}

static const double kAiAN[] = {3.46538101525629032477e-01, 1.20075952739645805542e+01,
                               7.62796053615234516538e+01, 1.68089224934630576269e+02,
                               1.59756391350164413639e+02, 7.05360906840444183113e+01,
                               1.40264691163389668864e+01, 9.99999999999999995305e-01};
static const double kAiAD[] = {5.67594532638770212846e-01, 1.47562562584847203173e+01,
                               8.45138970141474626562e+01, 1.77318088145400459522e+02,
                               1.64234692871529701831e+02, 7.14778400825575695274e+01,
                               1.40959135607834029598e+01, 1.00000000000000000470e+00};
static const double kAiAFN[] = {-1.31696323418331795333e-01, -6.26456544431912369773e-01,
                                -6.93158036036933542233e-01, -2.79779981545119124951e-01,
                                -4.91900132609500318020e-02, -4.06265923594885404393e-03,
                                -1.59276496239262096340e-04, -2.77649108155232920844e-06,
                                -1.67787698489114633780e-08};
static const double kAiAFD[] = {1.33560420706553243746e+01, 3.26825032795224613948e+01,
                                2.67367040941499554804e+01, 9.18707402907259625840e+00,
                                1.47529146771666414581e+00, 1.15687173795188044134e-01,
                                4.40291641615211203805e-03, 7.54720348287414296618e-05,
                                4.51850092970580378464e-07};
static const double kAiAGN[] = {1.97339932091685679179e-02, 3.91103029615688277255e-01,
                                1.06579897599595591108e+00, 9.39169229816650230044e-01,
                                3.51465656105547619242e-01, 6.33888919628925490927e-02,
                                5.85804113048388458567e-03, 2.82851600836737019778e-04,
                                6.98793669997260967291e-06, 8.11789239554389293311e-08,
                                3.41551784765923618484e-10};
static const double kAiAGD[] = {9.30892908077441974853e+00, 1.98352928718312140417e+01,
                                1.55646628932864612953e+01, 5.47686069422975497931e+00,
                                9.54293611618961883998e-01, 8.64580826352392193095e-02,
                                4.12656523824222607191e-03, 1.01259085116509135510e-04,
                                1.17166733214413521882e-06, 4.91834570062930015649e-09};

#define INV_SQRT_PI 5.64189583547756286948e-01

/* a / 3 as the kernel divides. XLA turns a division by a constant into a multiplication by the
 * rounded reciprocal, an ulp off, which Ai's phase at large |x| magnifies; a divisor it cannot
 * fold (3 + 0 * |finite|) keeps the division. */
static tp_hlo_value_t div3(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t finite) {
  return tp_div(b, a, tp_add(b, tp_k(b, 3, a), tp_mul(b, tp_k(b, 0, a), finite)));
}

/* Airy Ai: the oscillating asymptotic form below -2.09, the decaying one from 2.09, and between
 * them the Maclaurin series f and g (Ai = c1 f - c2 g), summed while the last term of f is above
 * epsilon relative to f, per element; the kernel needs at most 10 terms in float, 14 in double. */
static tp_hlo_value_t airy_ai(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  bool dbl = x.dtype == TP_DTYPE_F64;
  tp_hlo_value_t one = tp_k(b, 1, x);
  /* x < -2.09 */
  tp_hlo_value_t xn = tp_sel(b, tp_cmpk(b, TP_CMP_LT, x, -2.09), x, tp_k(b, -2.09, x));
  tp_hlo_value_t sq = tp_un(b, TP_HLO_SQRT, tp_un(b, TP_HLO_NEG, xn));
  tp_hlo_value_t zt = div3(b, tp_mul(b, tp_mul(b, tp_k(b, -2, x), xn), sq), xn); /* -2 x sqrt(-x) / 3 */
  tp_hlo_value_t z = tp_div(b, one, zt), zz = tp_mul(b, z, z);
  tp_hlo_value_t afn = polevl(b, zz, kAiAFN, N_OF(kAiAFN)), afd = polevl(b, zz, kAiAFD, N_OF(kAiAFD));
  tp_hlo_value_t agn = polevl(b, zz, kAiAGN, N_OF(kAiAGN)), agd = polevl(b, zz, kAiAGD, N_OF(kAiAGD));
  tp_hlo_value_t t = tp_add(b, zt, tp_k(b, 0.25 * 3.14159265358979323846, x));
  tp_hlo_value_t neg = tp_mul(b, tp_div(b, tp_k(b, INV_SQRT_PI, x), tp_un(b, TP_HLO_SQRT, sq)),
                  tp_sub(b, tp_mul(b, tp_un(b, TP_HLO_SIN, t), tp_add(b, one, tp_div(b, tp_mul(b, zz, afn), afd))),
                      tp_mul(b, tp_un(b, TP_HLO_COS, t), tp_div(b, tp_mul(b, z, agn), agd))));
  /* x >= 2.09 */
  tp_hlo_value_t xp = tp_sel(b, tp_cmpk(b, TP_CMP_GE, x, 2.09), x, tp_k(b, 2.09, x));
  tp_hlo_value_t zeta = div3(b, tp_mul(b, tp_mul(b, tp_k(b, 2, x), xp), tp_un(b, TP_HLO_SQRT, xp)), xp);
  tp_hlo_value_t iz = tp_div(b, one, zeta);
  tp_hlo_value_t ratio = tp_div(b, polevl(b, iz, kAiAN, N_OF(kAiAN)), polevl(b, iz, kAiAD, N_OF(kAiAD)));
  tp_hlo_value_t pos = tp_div(b, tp_mul(b, tp_k(b, INV_SQRT_PI, x), ratio),
                  tp_mul(b, tp_mul(b, tp_k(b, 2, x), tp_un(b, TP_HLO_SQRT, tp_un(b, TP_HLO_SQRT, xp))),
                      tp_un(b, TP_HLO_EXP, zeta)));
  /* the series; a term's k runs 3i-1, 3i, 3i+1 in the i-th step */
  tp_hlo_value_t f = one, g = x, m = one, n = x, tt = one, z3 = tp_mul(b, tp_mul(b, x, x), x);
  tp_hlo_value_t eps = tp_k(b, dbl ? DBL_EPSILON : FLT_EPSILON, x);
  for (int i = 1, steps = dbl ? 18 : 12; i <= steps; i++) {
    tp_hlo_value_t on = tp_cmp(b, TP_CMP_GT, tt, eps);
    tp_hlo_value_t m1 = tp_div(b, tp_div(b, tp_mul(b, m, z3), tp_k(b, 3 * i - 1, x)), tp_k(b, 3 * i, x));
    tp_hlo_value_t n1 = tp_div(b, tp_div(b, tp_mul(b, n, z3), tp_k(b, 3 * i, x)), tp_k(b, 3 * i + 1, x));
    tp_hlo_value_t f1 = tp_add(b, f, m1), g1 = tp_add(b, g, n1);
    m = tp_sel(b, on, m1, m);
    n = tp_sel(b, on, n1, n);
    f = tp_sel(b, on, f1, f);
    g = tp_sel(b, on, g1, g);
    tt = tp_sel(b, on, tp_un(b, TP_HLO_ABS, tp_div(b, m1, f1)), tt);
  }
  tp_hlo_value_t series = tp_sub(b, tp_mul(b, tp_k(b, 0.355028053887817239260, x), f),
                     tp_mul(b, tp_k(b, 0.258819403792806798405, x), g));
  tp_hlo_value_t r = tp_sel(b, tp_cmpk(b, TP_CMP_GE, x, 2.09), pos, series);
  r = tp_sel(b, tp_cmpk(b, TP_CMP_LT, x, -2.09), neg, r);
  r = tp_sel(b, tp_cmpk(b, TP_CMP_GT, x, 103.892), tp_k(b, 0, x), r);
  return tp_sel(b, tp_un(b, TP_HLO_IS_INF, x), tp_k(b, __builtin_nan(""), x), r);
}

/* ---- orthogonal polynomials P_n(x) ---- */

/* A kernel's early returns in its order: the first whose condition holds gives the value. */
typedef struct {
  int n;
  tp_hlo_value_t cond[8], val[8];
} cases_t;

static void when(cases_t *c, tp_hlo_value_t cond, tp_hlo_value_t v) {
  c->cond[c->n] = cond;
  c->val[c->n++] = v;
}

static tp_hlo_value_t any_true(tp_hlo_builder_t *b, tp_hlo_value_t p) {
  if (p.ndim == 0) return p;
  int64_t dims[TP_MAX_DIMS];
  for (int i = 0; i < p.ndim; i++) dims[i] = i;
  return tp_hlo_reduce(b, p, tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0), TP_HLO_OR, p.ndim, dims);
}

/* The int64 constant |v| shaped like |like|. */
static tp_hlo_value_t ik(tp_hlo_builder_t *b, int64_t v, tp_hlo_value_t like) {
  return tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, v), like.ndim, like.dims);
}

/* |k| (an integer scalar or tensor) as the float type of |like|, broadcast to its shape. */
static tp_hlo_value_t as_float(tp_hlo_builder_t *b, tp_hlo_value_t k, tp_hlo_value_t like) {
  return tp_hlo_broadcast_to(b, tp_hlo_convert(b, k, like.dtype), like.ndim, like.dims);
}

/* P_m from q = P_(m-1) and p = P_(m-2), as each kernel writes its loop (k counts its own way). */
static tp_hlo_value_t recurrence_step(tp_hlo_builder_t *b, tp_special_t code, tp_hlo_value_t y, tp_hlo_value_t m, tp_hlo_value_t p,
                             tp_hlo_value_t q) {
  tp_hlo_value_t one = ik(b, 1, m), k = tp_hlo_binary(b, TP_HLO_SUB, m, one); /* the kernels' k */
  switch (code) {
    case TP_SP_HERMITE_H: /* (x + x) q - k p, k = 2, 4, ... */
      return tp_sub(b, tp_mul(b, tp_add(b, y, y), q), tp_mul(b, as_float(b, tp_hlo_binary(b, TP_HLO_ADD, k, k), y), p));
    case TP_SP_HERMITE_HE:
      return tp_sub(b, tp_mul(b, y, q), tp_mul(b, as_float(b, k, y), p));
    case TP_SP_LAGUERRE_L: { /* ((2k + (1 - x)) q - k p) / (k + 1) */
      tp_hlo_value_t t = tp_add(b, as_float(b, tp_hlo_binary(b, TP_HLO_ADD, k, k), y), tp_sub(b, tp_k(b, 1, y), y));
      return tp_div(b, tp_sub(b, tp_mul(b, t, q), tp_mul(b, as_float(b, k, y), p)), as_float(b, m, y));
    }
    case TP_SP_LEGENDRE_P: { /* ((2k + 1) x q - k p) / (k + 1) */
      tp_hlo_value_t c = as_float(b, tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_ADD, k, k), one), y);
      return tp_div(b, tp_sub(b, tp_mul(b, tp_mul(b, c, y), q), tp_mul(b, as_float(b, k, y), p)), as_float(b, m, y));
    }
    default: /* the Chebyshev kinds: (y + y) q - p */
      return tp_sub(b, tp_mul(b, tp_add(b, y, y), q), p);
  }
}

/* The recurrence from P_0 = 1 and P_1 = |p1| up to each element's degree |nrec| (elements
 * below 2 keep P_1), in one loop over m = 2, 3, ... that runs while some element still needs a
 * step; an element that went NaN needs none, as the kernels stop there too. */
static tp_hlo_value_t recurrence(tp_hlo_builder_t *b, tp_special_t code, tp_hlo_value_t y, tp_hlo_value_t p1, tp_hlo_value_t nrec) {
  tp_hlo_value_t init[3] = {tp_hlo_constant_i(b, TP_DTYPE_I64, 2), tp_k(b, 1, y), p1}, s[3], outs[3];
  tp_hlo_while_begin(b, init, 3, s);
  tp_hlo_value_t mb = tp_hlo_broadcast_to(b, s[0], nrec.ndim, nrec.dims);
  tp_hlo_value_t live = tp_and(b, tp_cmp(b, TP_CMP_LE, mb, nrec), tp_cmp(b, TP_CMP_EQ, s[2], s[2]));
  tp_hlo_while_body(b, any_true(b, live), s);
  mb = tp_hlo_broadcast_to(b, s[0], nrec.ndim, nrec.dims);
  tp_hlo_value_t on = tp_cmp(b, TP_CMP_LE, mb, nrec);
  tp_hlo_value_t r = recurrence_step(b, code, y, mb, s[1], s[2]);
  tp_hlo_value_t next[3] = {tp_hlo_binary(b, TP_HLO_ADD, s[0], tp_hlo_constant_i(b, TP_DTYPE_I64, 1)),
                   tp_sel(b, on, s[2], s[1]), tp_sel(b, on, r, s[2])};
  tp_hlo_while_end(b, next, outs);
  return outs[2];
}

static bool shifted(tp_special_t code) {
  return code >= TP_SP_SHIFTED_CHEBYSHEV_T && code <= TP_SP_SHIFTED_CHEBYSHEV_W;
}

/* The Chebyshev kinds in y (x, or 2x - 1 for the shifted ones): the values at y = +-1 (x = 1, and
 * x = -1 or, shifted, x = 0), then above a degree the trigonometric form for |y| < 1, then the
 * recurrence. */
static void chebyshev_cases(tp_hlo_builder_t *b, tp_special_t code, tp_hlo_value_t x, tp_hlo_value_t y, tp_hlo_value_t ni,
                            tp_hlo_value_t even, cases_t *c, tp_hlo_value_t *p1) {
  int kind = (code - TP_SP_CHEBYSHEV_T) % 4; /* 0 T, 1 U, 2 V, 3 W */
  bool sh = shifted(code);
  tp_hlo_value_t one = tp_k(b, 1, y), n_f = as_float(b, ni, y);
  tp_hlo_value_t i1 = ik(b, 1, ni), np1 = as_float(b, tp_hlo_binary(b, TP_HLO_ADD, ni, i1), y);
  tp_hlo_value_t n2p1 = as_float(b, tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_ADD, ni, ni), i1), y);
  tp_hlo_value_t alt1 = tp_sel(b, even, one, tp_un(b, TP_HLO_NEG, one));          /* (-1)^n */
  tp_hlo_value_t alt_np1 = tp_sel(b, even, np1, tp_un(b, TP_HLO_NEG, np1));       /* (-1)^n (n + 1) */
  tp_hlo_value_t alt_n2p1 = tp_sel(b, even, n2p1, tp_un(b, TP_HLO_NEG, n2p1));    /* (-1)^n (2n + 1) */
  tp_hlo_value_t at_p1[4] = {one, np1, one, n2p1}, at_m1[4] = {alt1, alt_np1, alt_n2p1, alt1};
  tp_hlo_value_t is_p1 = tp_cmpk(b, TP_CMP_EQ, x, 1);
  tp_hlo_value_t is_m1 = tp_cmpk(b, TP_CMP_EQ, x, sh ? 0 : -1);
  when(c, is_p1, at_p1[kind]);
  when(c, is_m1, at_m1[kind]);
  static const int kTrigAbove[2][4] = {{6, 8, 8, 8}, {6, 6, 6, 4}};
  tp_hlo_value_t trig_on = tp_and(b, tp_cmp(b, TP_CMP_GT, ni, ik(b, kTrigAbove[sh][kind], ni)),
                       tp_cmpk(b, TP_CMP_LT, tp_un(b, TP_HLO_ABS, y), 1));
  tp_hlo_value_t th = tp_un(b, TP_HLO_ACOS, y), half = tp_div(b, th, tp_k(b, 2, y)), trig;
  tp_hlo_value_t nh = tp_mul(b, tp_add(b, n_f, tp_k(b, 0.5, y)), th); /* (n + 1/2) acos y */
  switch (kind) {
    case 0: trig = tp_un(b, TP_HLO_COS, tp_mul(b, n_f, th)); break;
    case 1: {
      tp_hlo_value_t s = tp_un(b, TP_HLO_SIN, th), a = tp_mul(b, np1, th);
      trig = tp_sel(b, tp_cmpk(b, TP_CMP_NE, s, 0), tp_div(b, tp_un(b, TP_HLO_SIN, a), s),
                 tp_div(b, tp_mul(b, np1, tp_un(b, TP_HLO_COS, a)), y));
      break;
    }
    case 2:
      trig = tp_sel(b, tp_cmpk(b, TP_CMP_NE, tp_un(b, TP_HLO_SIN, half), 1),
                 tp_div(b, tp_un(b, TP_HLO_COS, nh), tp_un(b, TP_HLO_COS, half)), alt_n2p1);
      break;
    default: /* the shifted kernel forgets the x > 0 case the plain one has */
      trig = tp_sel(b, tp_cmpk(b, TP_CMP_NE, tp_un(b, TP_HLO_COS, half), 1),
                 tp_div(b, tp_un(b, TP_HLO_SIN, nh), tp_un(b, TP_HLO_SIN, half)),
                 sh ? alt1 : tp_sel(b, tp_cmpk(b, TP_CMP_GT, y, 0), n2p1, alt1));
      break;
  }
  when(c, trig_on, trig);
  tp_hlo_value_t yy = tp_add(b, y, y);
  *p1 = kind == 0 ? y : kind == 1 ? yy : kind == 2 ? tp_sub(b, yy, one) : tp_add(b, yy, one);
}

/* P_n(x) of float x and n (the kernels take n as static_cast<int64_t>(n): truncated, and on
 * x86 NaN, infinities and values beyond int64 become INT64_MIN, a negative degree). */
static tp_hlo_value_t polynomial(tp_hlo_builder_t *b, tp_special_t code, tp_hlo_value_t x, tp_hlo_value_t nf) {
  tp_hlo_value_t valid = tp_cmpk(b, TP_CMP_LT, tp_un(b, TP_HLO_ABS, nf), 9223372036854775808.0);
  tp_hlo_value_t ni = tp_sel(b, valid, tp_hlo_convert(b, nf, TP_DTYPE_I64), ik(b, INT64_MIN, nf));
  tp_hlo_value_t even = tp_cmp(b, TP_CMP_EQ, tp_hlo_binary(b, TP_HLO_AND, ni, ik(b, 1, ni)), ik(b, 0, ni));
  tp_hlo_value_t one = tp_k(b, 1, x), zero = tp_k(b, 0, x), p1, y = x;
  cases_t c = {0};
  when(&c, tp_cmp(b, TP_CMP_LT, ni, ik(b, 0, ni)), zero);
  int limit = x.dtype == TP_DTYPE_F64 ? 512 : 128; /* Hermite: NaN above it */
  switch (code) {
    case TP_SP_HERMITE_H: case TP_SP_HERMITE_HE:
      p1 = code == TP_SP_HERMITE_H ? tp_add(b, x, x) : x;
      when(&c, tp_cmp(b, TP_CMP_EQ, ni, ik(b, 0, ni)), one);
      when(&c, tp_cmp(b, TP_CMP_EQ, ni, ik(b, 1, ni)), p1);
      when(&c, tp_cmp(b, TP_CMP_GT, ni, ik(b, limit, ni)), tp_k(b, __builtin_nan(""), x));
      break;
    case TP_SP_LAGUERRE_L:
      p1 = tp_sub(b, one, x);
      when(&c, tp_cmpk(b, TP_CMP_EQ, x, 0), one);
      break;
    case TP_SP_LEGENDRE_P:
      p1 = x;
      when(&c, tp_cmpk(b, TP_CMP_EQ, tp_un(b, TP_HLO_ABS, x), 1),
           tp_sel(b, tp_or(b, tp_cmpk(b, TP_CMP_GT, x, 0), even), one, tp_un(b, TP_HLO_NEG, one)));
      break;
    default:
      if (shifted(code)) y = tp_sub(b, tp_add(b, x, x), one);
      chebyshev_cases(b, code, x, y, ni, even, &c, &p1);
      break;
  }
  if (code != TP_SP_HERMITE_H && code != TP_SP_HERMITE_HE) {
    when(&c, tp_cmp(b, TP_CMP_EQ, ni, ik(b, 0, ni)), one);
    when(&c, tp_cmp(b, TP_CMP_EQ, ni, ik(b, 1, ni)), p1);
  }
  tp_hlo_value_t taken = c.cond[0];
  for (int i = 1; i < c.n; i++) taken = tp_or(b, taken, c.cond[i]);
  tp_hlo_value_t r = recurrence(b, code, y, p1, tp_sel(b, taken, ik(b, 0, ni), ni));
  for (int i = c.n - 1; i >= 0; i--) r = tp_sel(b, c.cond[i], c.val[i], r);
  return r;
}

/* ---- regularized incomplete gamma functions igamma(a, x) = P(a, x), igammac = Q(a, x) ---- */

/* Each of the kernel's methods below runs for the elements |on| that take it; its iterations
 * (up to 2000 of them) run in a stablehlo.while while some element has not met its kernel's
 * stopping test. An element whose sum went NaN stops too: its result is NaN either way. */

/* The kernel's constants for float and double. */
typedef struct {
  double machep, maxlog, big, biginv;
} igam_consts_t;

static igam_consts_t igam_consts(tp_hlo_value_t like) {
  bool dbl = like.dtype == TP_DTYPE_F64;
  igam_consts_t c = {dbl ? 1.11022302462515654042E-16 : 5.9604644775390625E-8,
                     dbl ? 7.09782712893383996843E2 : 88.72283905206835,
                     dbl ? 4.503599627370496e15 : 16777216.,
                     dbl ? 2.22044604925031308085e-16 : 5.9604644775390625E-8};
  return c;
}

static tp_hlo_value_t i32k(tp_hlo_builder_t *b, int64_t v) { return tp_hlo_constant_i(b, TP_DTYPE_I32, v); }
static tp_hlo_value_t not_nan(tp_hlo_builder_t *b, tp_hlo_value_t x) { return tp_cmp(b, TP_CMP_EQ, x, x); }

/* Lanczos' sum scaled by exp(g) (Boost's, through Math.h's ratevl): a rational function of a,
 * evaluated in 1/a above 1. */
static tp_hlo_value_t lanczos_sum_expg_scaled(tp_hlo_builder_t *b, tp_hlo_value_t a) {
  static const double num[13] = {
      0.006061842346248906525783753964555936883222, 0.5098416655656676188125178644804694509993,
      19.51992788247617482847860966235652136208,    449.9445569063168119446858607650988409623,
      6955.999602515376140356310115515198987526,    75999.29304014542649875303443598909137092,
      601859.6171681098786670226533699352302507,    3481712.15498064590882071018964774556468,
      14605578.08768506808414169982791359218571,    43338889.32467613834773723740590533316085,
      86363131.28813859145546927288977868422342,    103794043.1163445451906271053616070238554,
      56906521.91347156388090791033559122686859};
  static const double den[13] = {1., 66., 1925., 32670., 357423., 2637558., 13339535.,
                                 45995730., 105258076., 150917976., 120543840., 39916800., 0.};
  double rnum[13], rden[13];
  for (int i = 0; i < 13; i++) rnum[i] = num[12 - i], rden[i] = den[12 - i];
  tp_hlo_value_t big = tp_cmpk(b, TP_CMP_GT, tp_un(b, TP_HLO_ABS, a), 1);
  tp_hlo_value_t y = tp_sel(b, big, tp_div(b, tp_k(b, 1, a), a), a);
  tp_hlo_value_t n = tp_sel(b, big, polevl(b, y, rnum, 13), polevl(b, y, num, 13));
  tp_hlo_value_t d = tp_sel(b, big, polevl(b, y, rden, 13), polevl(b, y, den, 13));
  return tp_div(b, n, d);
}

/* x^a e^-x / Gamma(a), as _igam_helper_fac computes it. */
static tp_hlo_value_t igam_fac(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t x, const igam_consts_t *c) {
  const double g = 6.024680040776729583740234375;
  tp_hlo_value_t ax = tp_sub(b, tp_sub(b, tp_mul(b, a, tp_un(b, TP_HLO_LOG, x)), x), tp_un(b, TP_HLO_LGAMMA, a));
  tp_hlo_value_t direct = tp_sel(b, tp_cmpk(b, TP_CMP_LT, ax, -c->maxlog), tp_k(b, 0, a), tp_un(b, TP_HLO_EXP, ax));
  tp_hlo_value_t fac = tp_sub(b, tp_add(b, a, tp_k(b, g, a)), tp_k(b, 0.5, a));
  tp_hlo_value_t res = tp_div(b, tp_un(b, TP_HLO_SQRT, tp_div(b, fac, tp_k(b, 2.718281828459045, a))),
                  lanczos_sum_expg_scaled(b, a));
  tp_hlo_value_t small = tp_mul(b, tp_un(b, TP_HLO_EXP, tp_sub(b, a, x)),
                    tp_hlo_binary(b, TP_HLO_POW, tp_div(b, x, fac), a));
  tp_hlo_value_t numfac = tp_div(b, tp_add(b, tp_sub(b, tp_sub(b, x, a), tp_k(b, g, a)), tp_k(b, 0.5, a)), fac);
  tp_hlo_value_t large = tp_un(b, TP_HLO_EXP,
                   tp_add(b, tp_mul(b, a, tp_sub(b, tp_un(b, TP_HLO_LOG1P, numfac), numfac)),
                       tp_div(b, tp_mul(b, x, tp_k(b, 0.5 - g, a)), fac)));
  tp_hlo_value_t both_small = tp_and(b, tp_cmpk(b, TP_CMP_LT, a, 200), tp_cmpk(b, TP_CMP_LT, x, 200));
  res = tp_mul(b, res, tp_sel(b, both_small, small, large));
  tp_hlo_value_t far = tp_cmp(b, TP_CMP_GT, tp_un(b, TP_HLO_ABS, tp_sub(b, a, x)),
                  tp_mul(b, tp_k(b, 0.4, a), tp_un(b, TP_HLO_ABS, a)));
  return tp_sel(b, far, direct, res);
}

/* P(a, x) by its power series (DLMF 8.11.4). */
static tp_hlo_value_t igam_series(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t x, tp_hlo_value_t on, const igam_consts_t *c) {
  tp_hlo_value_t ax = igam_fac(b, a, x, c), one = tp_k(b, 1, a);
  on = tp_and(b, on, tp_and(b, tp_cmpk(b, TP_CMP_NE, ax, 0), not_nan(b, ax)));
  tp_hlo_value_t init[5] = {i32k(b, 0), a, one, one, on}, s[5], o[5];
  tp_hlo_while_begin(b, init, 5, s);
  tp_hlo_while_body(b, tp_and(b, tp_cmp(b, TP_CMP_LT, s[0], i32k(b, 2000)), any_true(b, s[4])), s);
  tp_hlo_value_t r = tp_add(b, s[1], one), t = tp_mul(b, s[2], tp_div(b, x, r)), ans = tp_add(b, s[3], t);
  tp_hlo_value_t go = tp_and(b, tp_not(b, tp_cmp(b, TP_CMP_LE, t, tp_mul(b, tp_k(b, c->machep, a), ans))), not_nan(b, ans));
  tp_hlo_value_t next[5] = {tp_hlo_binary(b, TP_HLO_ADD, s[0], i32k(b, 1)), tp_sel(b, s[4], r, s[1]),
                   tp_sel(b, s[4], t, s[2]), tp_sel(b, s[4], ans, s[3]), tp_and(b, s[4], go)};
  tp_hlo_while_end(b, next, o);
  return tp_sel(b, tp_cmpk(b, TP_CMP_EQ, ax, 0), tp_k(b, 0, a), tp_div(b, tp_mul(b, o[3], ax), a));
}

/* Q(a, x) by DLMF 8.7.3, the series that avoids cancellation for small x. */
static tp_hlo_value_t igamc_series(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t x, tp_hlo_value_t on, const igam_consts_t *c) {
  tp_hlo_value_t init[4] = {i32k(b, 1), tp_k(b, 1, a), tp_k(b, 0, a), on}, s[4], o[4];
  tp_hlo_while_begin(b, init, 4, s);
  tp_hlo_while_body(b, tp_and(b, tp_cmp(b, TP_CMP_LT, s[0], i32k(b, 2000)), any_true(b, s[3])), s);
  tp_hlo_value_t n = as_float(b, s[0], a);
  tp_hlo_value_t fac = tp_mul(b, s[1], tp_div(b, tp_un(b, TP_HLO_NEG, x), n));
  tp_hlo_value_t term = tp_div(b, fac, tp_add(b, a, n)), sum = tp_add(b, s[2], term);
  tp_hlo_value_t go = tp_and(b, tp_not(b, tp_cmp(b, TP_CMP_LE, tp_un(b, TP_HLO_ABS, term),
                                 tp_mul(b, tp_k(b, c->machep, a), tp_un(b, TP_HLO_ABS, sum)))),
                  not_nan(b, sum));
  tp_hlo_value_t next[4] = {tp_hlo_binary(b, TP_HLO_ADD, s[0], i32k(b, 1)), tp_sel(b, s[3], fac, s[1]),
                   tp_sel(b, s[3], sum, s[2]), tp_and(b, s[3], go)};
  tp_hlo_while_end(b, next, o);
  tp_hlo_value_t logx = tp_un(b, TP_HLO_LOG, x), alx = tp_mul(b, a, logx);
  tp_hlo_value_t head = tp_un(b, TP_HLO_NEG, tp_un(b, TP_HLO_EXPM1, tp_sub(b, alx, tp_un(b, TP_HLO_LGAMMA, tp_add(b, tp_k(b, 1, a), a)))));
  return tp_sub(b, head, tp_mul(b, tp_un(b, TP_HLO_EXP, tp_sub(b, alx, tp_un(b, TP_HLO_LGAMMA, a))), o[2]));
}

/* Q(a, x) by its continued fraction (DLMF 8.9.2), the convergents rescaled when they grow. */
static tp_hlo_value_t igamc_fraction(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t x, tp_hlo_value_t on, const igam_consts_t *c) {
  tp_hlo_value_t ax = igam_fac(b, a, x, c), one = tp_k(b, 1, a);
  on = tp_and(b, on, tp_and(b, tp_cmpk(b, TP_CMP_NE, ax, 0), not_nan(b, ax)));
  tp_hlo_value_t y = tp_sub(b, one, a), z = tp_add(b, tp_add(b, x, y), one);
  tp_hlo_value_t pkm1 = tp_add(b, x, one), qkm1 = tp_mul(b, z, x);
  /* i, y, z, pkm1, pkm2, qkm1, qkm2, ans, on */
  tp_hlo_value_t init[9] = {i32k(b, 0), y, z, pkm1, one, qkm1, x, tp_div(b, pkm1, qkm1), on}, s[9], o[9];
  tp_hlo_while_begin(b, init, 9, s);
  tp_hlo_while_body(b, tp_and(b, tp_cmp(b, TP_CMP_LT, s[0], i32k(b, 2000)), any_true(b, s[8])), s);
  tp_hlo_value_t cc = as_float(b, tp_hlo_binary(b, TP_HLO_ADD, s[0], i32k(b, 1)), a);
  tp_hlo_value_t yn = tp_add(b, s[1], one), zn = tp_add(b, s[2], tp_k(b, 2, a)), yc = tp_mul(b, yn, cc);
  tp_hlo_value_t pk = tp_sub(b, tp_mul(b, s[3], zn), tp_mul(b, s[4], yc));
  tp_hlo_value_t qk = tp_sub(b, tp_mul(b, s[5], zn), tp_mul(b, s[6], yc));
  tp_hlo_value_t qnz = tp_cmpk(b, TP_CMP_NE, qk, 0), r = tp_div(b, pk, qk);
  tp_hlo_value_t t = tp_sel(b, qnz, tp_un(b, TP_HLO_ABS, tp_div(b, tp_sub(b, s[7], r), r)), one);
  tp_hlo_value_t ans = tp_sel(b, qnz, r, s[7]);
  tp_hlo_value_t scale = tp_sel(b, tp_cmpk(b, TP_CMP_GT, tp_un(b, TP_HLO_ABS, pk), c->big), tp_k(b, c->biginv, a), one);
  tp_hlo_value_t pkm2n = tp_mul(b, s[3], scale), pkm1n = tp_mul(b, pk, scale);
  tp_hlo_value_t qkm2n = tp_mul(b, s[5], scale), qkm1n = tp_mul(b, qk, scale);
  /* a NaN convergent is replaced by the next one: only the kernel's test stops it */
  tp_hlo_value_t go = tp_not(b, tp_cmpk(b, TP_CMP_LE, t, c->machep));
  tp_hlo_value_t on_ = s[8];
  tp_hlo_value_t next[9] = {tp_hlo_binary(b, TP_HLO_ADD, s[0], i32k(b, 1)), tp_sel(b, on_, yn, s[1]),
                   tp_sel(b, on_, zn, s[2]), tp_sel(b, on_, pkm1n, s[3]), tp_sel(b, on_, pkm2n, s[4]),
                   tp_sel(b, on_, qkm1n, s[5]), tp_sel(b, on_, qkm2n, s[6]), tp_sel(b, on_, ans, s[7]),
                   tp_and(b, on_, go)};
  tp_hlo_while_end(b, next, o);
  return tp_sel(b, tp_cmpk(b, TP_CMP_EQ, ax, 0), tp_k(b, 0, a), tp_mul(b, o[7], ax));
}

/* Temme's uniform asymptotic expansion for large a near x (DLMF 8.12.3/8.12.4). */
static const double kIgamD[25][25] = {
    {-3.3333333333333333e-1, 8.3333333333333333e-2, -1.4814814814814815e-2, 1.1574074074074074e-3,
     3.527336860670194e-4, -1.7875514403292181e-4, 3.9192631785224378e-5, -2.1854485106799922e-6,
     -1.85406221071516e-6, 8.296711340953086e-7, -1.7665952736826079e-7, 6.7078535434014986e-9,
     1.0261809784240308e-8, -4.3820360184533532e-9, 9.1476995822367902e-10, -2.551419399494625e-11,
     -5.8307721325504251e-11, 2.4361948020667416e-11, -5.0276692801141756e-12,
     1.1004392031956135e-13, 3.3717632624009854e-13, -1.3923887224181621e-13,
     2.8534893807047443e-14, -5.1391118342425726e-16, -1.9752288294349443e-15},
    {-1.8518518518518519e-3, -3.4722222222222222e-3, 2.6455026455026455e-3, -9.9022633744855967e-4,
     2.0576131687242798e-4, -4.0187757201646091e-7, -1.8098550334489978e-5, 7.6491609160811101e-6,
     -1.6120900894563446e-6, 4.6471278028074343e-9, 1.378633446915721e-7, -5.752545603517705e-8,
     1.1951628599778147e-8, -1.7543241719747648e-11, -1.0091543710600413e-9,
     4.1627929918425826e-10, -8.5639070264929806e-11, 6.0672151016047586e-14,
     7.1624989648114854e-12, -2.9331866437714371e-12, 5.9966963656836887e-13,
     -2.1671786527323314e-16, -4.9783399723692616e-14, 2.0291628823713425e-14,
     -4.13125571381061e-15},
    {4.1335978835978836e-3, -2.6813271604938272e-3, 7.7160493827160494e-4, 2.0093878600823045e-6,
     -1.0736653226365161e-4, 5.2923448829120125e-5, -1.2760635188618728e-5, 3.4235787340961381e-8,
     1.3721957309062933e-6, -6.298992138380055e-7, 1.4280614206064242e-7, -2.0477098421990866e-10,
     -1.4092529910867521e-8, 6.228974084922022e-9, -1.3670488396617113e-9, 9.4283561590146782e-13,
     1.2872252400089318e-10, -5.5645956134363321e-11, 1.1975935546366981e-11,
     -4.1689782251838635e-15, -1.0940640427884594e-12, 4.6622399463901357e-13,
     -9.905105763906906e-14, 1.8931876768373515e-17, 8.8592218725911273e-15},
    {6.4943415637860082e-4, 2.2947209362139918e-4, -4.6918949439525571e-4, 2.6772063206283885e-4,
     -7.5618016718839764e-5, -2.3965051138672967e-7, 1.1082654115347302e-5, -5.6749528269915966e-6,
     1.4230900732435884e-6, -2.7861080291528142e-11, -1.6958404091930277e-7, 8.0994649053880824e-8,
     -1.9111168485973654e-8, 2.3928620439808118e-12, 2.0620131815488798e-9,
     -9.4604966618551322e-10, 2.1541049775774908e-10, -1.388823336813903e-14,
     -2.1894761681963939e-11, 9.7909989511716851e-12, -2.1782191880180962e-12,
     6.2088195734079014e-17, 2.126978363279737e-13, -9.3446887915174333e-14,
     2.0453671226782849e-14},
    {-8.618882909167117e-4, 7.8403922172006663e-4, -2.9907248030319018e-4, -1.4638452578843418e-6,
     6.6414982154651222e-5, -3.9683650471794347e-5, 1.1375726970678419e-5, 2.5074972262375328e-10,
     -1.6954149536558306e-6, 8.9075075322053097e-7, -2.2929348340008049e-7, 2.956794137544049e-11,
     2.8865829742708784e-8, -1.4189739437803219e-8, 3.4463580499464897e-9, -2.3024517174528067e-13,
     -3.9409233028046405e-10, 1.8602338968504502e-10, -4.356323005056618e-11,
     1.2786001016296231e-15, 4.6792750266579195e-12, -2.1492464706134829e-12,
     4.9088156148096522e-13, -6.3385914848915603e-18, -5.0453320690800944e-14},
    {-3.3679855336635815e-4, -6.9728137583658578e-5, 2.7727532449593921e-4, -1.9932570516188848e-4,
     6.7977804779372078e-5, 1.419062920643967e-7, -1.3594048189768693e-5, 8.0184702563342015e-6,
     -2.2914811765080952e-6, -3.252473551298454e-10, 3.4652846491085265e-7, -1.8447187191171343e-7,
     4.8240967037894181e-8, -1.7989466721743515e-14, -6.3061945000135234e-9, 3.1624176287745679e-9,
     -7.8409242536974293e-10, 5.1926791652540407e-15, 9.3589442423067836e-11,
     -4.5134262161632782e-11, 1.0799129993116827e-11, -3.661886712685252e-17,
     -1.210902069055155e-12, 5.6807435849905643e-13, -1.3249659916340829e-13},
    {5.3130793646399222e-4, -5.9216643735369388e-4, 2.7087820967180448e-4, 7.9023532326603279e-7,
     -8.1539693675619688e-5, 5.6116827531062497e-5, -1.8329116582843376e-5, -3.0796134506033048e-9,
     3.4651553688036091e-6, -2.0291327396058604e-6, 5.7887928631490037e-7, 2.338630673826657e-13,
     -8.8286007463304835e-8, 4.7435958880408128e-8, -1.2545415020710382e-8, 8.6496488580102925e-14,
     1.6846058979264063e-9, -8.5754928235775947e-10, 2.1598224929232125e-10,
     -7.6132305204761539e-16, -2.6639822008536144e-11, 1.3065700536611057e-11,
     -3.1799163902367977e-12, 4.7109761213674315e-18, 3.6902800842763467e-13},
    {3.4436760689237767e-4, 5.1717909082605922e-5, -3.3493161081142236e-4, 2.812695154763237e-4,
     -1.0976582244684731e-4, -1.2741009095484485e-7, 2.7744451511563644e-5, -1.8263488805711333e-5,
     5.7876949497350524e-6, 4.9387589339362704e-10, -1.0595367014026043e-6, 6.1667143761104075e-7,
     -1.7562973359060462e-7, -1.2974473287015439e-12, 2.695423606288966e-8, -1.4578352908731271e-8,
     3.887645959386175e-9, -3.8810022510194121e-17, -5.3279941738772867e-10,
     2.7437977643314845e-10, -6.9957960920705679e-11, 2.5899863874868481e-17,
     8.8566890996696381e-12, -4.403168815871311e-12, 1.0865561947091654e-12},
    {-6.5262391859530942e-4, 8.3949872067208728e-4, -4.3829709854172101e-4, -6.969091458420552e-7,
     1.6644846642067548e-4, -1.2783517679769219e-4, 4.6299532636913043e-5, 4.5579098679227077e-9,
     -1.0595271125805195e-5, 6.7833429048651666e-6, -2.1075476666258804e-6,
     -1.7213731432817145e-11, 3.7735877416110979e-7, -2.1867506700122867e-7, 6.2202288040189269e-8,
     6.5977038267330006e-16, -9.5903864974256858e-9, 5.2132144922808078e-9, -1.3991589583935709e-9,
     5.382058999060575e-16, 1.9484714275467745e-10, -1.0127287556389682e-10,
     2.6077347197254926e-11, -5.0904186999932993e-18, -3.3721464474854592e-12},
    {-5.9676129019274625e-4, -7.2048954160200106e-5, 6.7823088376673284e-4, -6.4014752602627585e-4,
     2.7750107634328704e-4, 1.8197008380465151e-7, -8.4795071170685032e-5, 6.105192082501531e-5,
     -2.1073920183404862e-5, -8.8585890141255994e-10, 4.5284535953805377e-6,
     -2.8427815022504408e-6, 8.7082341778646412e-7, 3.6886101871706965e-12, -1.5344695190702061e-7,
     8.862466778790695e-8, -2.5184812301826817e-8, -1.0225912098215092e-14, 3.8969470758154777e-9,
     -2.1267304792235635e-9, 5.7370135528051385e-10, -1.887749850169741e-19,
     -8.0931538694657866e-11, 4.2382723283449199e-11, -1.1002224534207726e-11},
    {1.3324454494800656e-3, -1.9144384985654775e-3, 1.1089369134596637e-3, 9.932404122642299e-7,
     -5.0874501293093199e-4, 4.2735056665392884e-4, -1.6858853767910799e-4, -8.1301893922784998e-9,
     4.5284402370562147e-5, -3.127053674781734e-5, 1.044986828530338e-5, 4.8435226265680926e-11,
     -2.1482565873456258e-6, 1.329369701097492e-6, -4.0295693092101029e-7, -1.7567877666323291e-13,
     7.0145043163668257e-8, -4.040787734999483e-8, 1.1474026743371963e-8, 3.9642746853563325e-18,
     -1.7804938269892714e-9, 9.7480262548731646e-10, -2.6405338676507616e-10,
     5.794875163403742e-18, 3.7647749553543836e-11},
    {1.579727660730835e-3, 1.6251626278391582e-4, -2.0633421035543276e-3, 2.1389686185689098e-3,
     -1.0108559391263003e-3, -3.9912705529919201e-7, 3.6235025084764691e-4, -2.8143901463712154e-4,
     1.0449513336495887e-4, 2.1211418491830297e-9, -2.5779417251947842e-5, 1.7281818956040463e-5,
     -5.6413773872904282e-6, -1.1024320105776174e-11, 1.1223224418895175e-6,
     -6.8693396379526735e-7, 2.0653236975414887e-7, 4.6714772409838506e-14, -3.5609886164949055e-8,
     2.0470855345905963e-8, -5.8091738633283358e-9, -1.332821287582869e-16, 9.0354604391335133e-10,
     -4.9598782517330834e-10, 1.3481607129399749e-10},
    {-4.0725121195140166e-3, 6.4033628338080698e-3, -4.0410161081676618e-3, -2.183732802866233e-6,
     2.1740441801254639e-3, -1.9700440518418892e-3, 8.3595469747962458e-4, 1.9445447567109655e-8,
     -2.5779387120421696e-4, 1.9009987368139304e-4, -6.7696499937438965e-5,
     -1.4440629666426572e-10, 1.5712512518742269e-5, -1.0304008744776893e-5, 3.304517767401387e-6,
     7.9829760242325709e-13, -6.4097794149313004e-7, 3.8894624761300056e-7, -1.1618347644948869e-7,
     -2.816808630596451e-15, 1.9878012911297093e-8, -1.1407719956357511e-8, 3.2355857064185555e-9,
     4.1759468293455945e-20, -5.0423112718105824e-10},
    {-5.9475779383993003e-3, -5.4016476789260452e-4, 8.7910413550767898e-3, -9.8576315587856125e-3,
     5.0134695031021538e-3, 1.2807521786221875e-6, -2.0626019342754683e-3, 1.7109128573523058e-3,
     -6.7695312714133799e-4, -6.9011545676562133e-9, 1.8855128143995902e-4, -1.3395215663491969e-4,
     4.6263183033528039e-5, 4.0034230613321351e-11, -1.0255652921494033e-5, 6.612086372797651e-6,
     -2.0913022027253008e-6, -2.0951775649603837e-13, 3.9756029041993247e-7,
     -2.3956211978815887e-7, 7.1182883382145864e-8, 8.925574873053455e-16, -1.2101547235064676e-8,
     6.9350618248334386e-9, -1.9661464453856102e-9},
    {1.7402027787522711e-2, -2.9527880945699121e-2, 2.0045875571402799e-2, 7.0289515966903407e-6,
     -1.2375421071343148e-2, 1.1976293444235254e-2, -5.4156038466518525e-3, -6.3290893396418616e-8,
     1.8855118129005065e-3, -1.473473274825001e-3, 5.5515810097708387e-4, 5.2406834412550662e-10,
     -1.4357913535784836e-4, 9.9181293224943297e-5, -3.3460834749478311e-5,
     -3.5755837291098993e-12, 7.1560851960630076e-6, -4.5516802628155526e-6, 1.4236576649271475e-6,
     1.8803149082089664e-14, -2.6623403898929211e-7, 1.5950642189595716e-7, -4.7187514673841102e-8,
     -6.5107872958755177e-17, 7.9795091026746235e-9},
    {3.0249124160905891e-2, 2.4817436002649977e-3, -4.9939134373457022e-2, 5.9915643009307869e-2,
     -3.2483207601623391e-2, -5.7212968652103441e-6, 1.5085251778569354e-2, -1.3261324005088445e-2,
     5.5515262632426148e-3, 3.0263182257030016e-8, -1.7229548406756723e-3, 1.2893570099929637e-3,
     -4.6845138348319876e-4, -1.830259937893045e-10, 1.1449739014822654e-4, -7.7378565221244477e-5,
     2.5625836246985201e-5, 1.0766165333192814e-12, -5.3246809282422621e-6, 3.349634863064464e-6,
     -1.0381253128684018e-6, -5.608909920621128e-15, 1.9150821930676591e-7, -1.1418365800203486e-7,
     3.3654425209171788e-8},
    {-9.9051020880159045e-2, 1.7954011706123486e-1, -1.2989606383463778e-1, -3.1478872752284357e-5,
     9.0510635276848131e-2, -9.2828824411184397e-2, 4.4412112839877808e-2, 2.7779236316835888e-7,
     -1.7229543805449697e-2, 1.4182925050891573e-2, -5.6214161633747336e-3, -2.39598509186381e-9,
     1.6029634366079908e-3, -1.1606784674435773e-3, 4.1001337768153873e-4, 1.8365800754090661e-11,
     -9.5844256563655903e-5, 6.3643062337764708e-5, -2.076250624489065e-5, -1.1806020912804483e-13,
     4.2131808239120649e-6, -2.6262241337012467e-6, 8.0770620494930662e-7, 6.0125912123632725e-16,
     -1.4729737374018841e-7},
    {-1.9994542198219728e-1, -1.5056113040026424e-2, 3.6470239469348489e-1, -4.6435192311733545e-1,
     2.6640934719197893e-1, 3.4038266027147191e-5, -1.3784338709329624e-1, 1.276467178337056e-1,
     -5.6213828755200985e-2, -1.753150885483011e-7, 1.9235592956768113e-2, -1.5088821281095315e-2,
     5.7401854451350123e-3, 1.0622382710310225e-9, -1.5335082692563998e-3, 1.0819320643228214e-3,
     -3.7372510193945659e-4, -6.6170909729031985e-12, 8.4263617380909628e-5,
     -5.5150706827483479e-5, 1.7769536448348069e-5, 3.8827923210205533e-14, -3.53513697488768e-6,
     2.1865832130045269e-6, -6.6812849447625594e-7},
    {7.2438608504029431e-1, -1.3918010932653375, 1.0654143352413968, 1.876173868950258e-4,
     -8.2705501176152696e-1, 8.9352433347828414e-1, -4.4971003995291339e-1, -1.6107401567546652e-6,
     1.9235590165271091e-1, -1.6597702160042609e-1, 6.8882222681814333e-2, 1.3910091724608687e-8,
     -2.146911561508663e-2, 1.6228980898865892e-2, -5.9796016172584256e-3, -1.1287469112826745e-10,
     1.5167451119784857e-3, -1.0478634293553899e-3, 3.5539072889126421e-4, 8.1704322111801517e-13,
     -7.7773013442452395e-5, 5.0291413897007722e-5, -1.6035083867000518e-5, 1.2469354315487605e-14,
     3.1369106244517615e-6},
    {1.6668949727276811, 1.165462765994632e-1, -3.3288393225018906, 4.4692325482864037,
     -2.6977693045875807, -2.600667859891061e-4, 1.5389017615694539, -1.4937962361134612,
     6.8881964633233148e-1, 1.3077482004552385e-6, -2.5762963325596288e-1, 2.1097676102125449e-1,
     -8.3714408359219882e-2, -7.7920428881354753e-9, 2.4267923064833599e-2, -1.7813678334552311e-2,
     6.3970330388900056e-3, 4.9430807090480523e-11, -1.5554602758465635e-3, 1.0561196919903214e-3,
     -3.5277184460472902e-4, 9.3002334645022459e-14, 7.5285855026557172e-5, -4.8186515569156351e-5,
     1.5227271505597605e-5},
    {-6.6188298861372935, 1.3397985455142589e+1, -1.0789350606845146e+1, -1.4352254537875018e-3,
     9.2333694596189809, -1.0456552819547769e+1, 5.5105526029033471, 1.2024439690716742e-5,
     -2.5762961164755816, 2.3207442745387179, -1.0045728797216284, -1.0207833290021914e-7,
     3.3975092171169466e-1, -2.6720517450757468e-1, 1.0235252851562706e-1, 8.4329730484871625e-10,
     -2.7998284958442595e-2, 2.0066274144976813e-2, -7.0554368915086242e-3, 1.9402238183698188e-12,
     1.6562888105449611e-3, -1.1082898580743683e-3, 3.654545161310169e-4, -5.1290032026971794e-11,
     -7.6340103696869031e-5},
    {-1.7112706061976095e+1, -1.1208044642899116, 3.7131966511885444e+1, -5.2298271025348962e+1,
     3.3058589696624618e+1, 2.4791298976200222e-3, -2.061089403411526e+1, 2.088672775145582e+1,
     -1.0045703956517752e+1, -1.2238783449063012e-5, 4.0770134274221141, -3.473667358470195,
     1.4329352617312006, 7.1359914411879712e-8, -4.4797257159115612e-1, 3.4112666080644461e-1,
     -1.2699786326594923e-1, -2.8953677269081528e-10, 3.3125776278259863e-2,
     -2.3274087021036101e-2, 8.0399993503648882e-3, -1.177805216235265e-9, -1.8321624891071668e-3,
     1.2108282933588665e-3, -3.9479941246822517e-4},
    {7.389033153567425e+1, -1.5680141270402273e+2, 1.322177542759164e+2, 1.3692876877324546e-2,
     -1.2366496885920151e+2, 1.4620689391062729e+2, -8.0365587724865346e+1, -1.1259851148881298e-4,
     4.0770132196179938e+1, -3.8210340013273034e+1, 1.719522294277362e+1, 9.3519707955168356e-7,
     -6.2716159907747034, 5.1168999071852637, -2.0319658112299095, -4.9507215582761543e-9,
     5.9626397294332597e-1, -4.4220765337238094e-1, 1.6079998700166273e-1, -2.4733786203223402e-8,
     -4.0307574759979762e-2, 2.7849050747097869e-2, -9.4751858992054221e-3, 6.419922235909132e-6,
     2.1250180774699461e-3},
    {2.1216837098382522e+2, 1.3107863022633868e+1, -4.9698285932871748e+2, 7.3121595266969204e+2,
     -4.8213821720890847e+2, -2.8817248692894889e-2, 3.2616720302947102e+2, -3.4389340280087117e+2,
     1.7195193870816232e+2, 1.4038077378096158e-4, -7.52594195897599e+1, 6.651969984520934e+1,
     -2.8447519748152462e+1, -7.613702615875391e-7, 9.5402237105304373, -7.5175301113311376,
     2.8943997568871961, -4.6612194999538201e-7, -8.0615149598794088e-1, 5.8483006570631029e-1,
     -2.0845408972964956e-1, 1.4765818959305817e-4, 5.1000433863753019e-2, -3.3066252141883665e-2,
     1.5109265210467774e-2},
    {-9.8959643098322368e+2, 2.1925555360905233e+3, -1.9283586782723356e+3, -1.5925738122215253e-1,
     1.9569985945919857e+3, -2.4072514765081556e+3, 1.3756149959336496e+3, 1.2920735237496668e-3,
     -7.525941715948055e+2, 7.3171668742208716e+2, -3.4137023466220065e+2, -9.9857390260608043e-6,
     1.3356313181291573e+2, -1.1276295161252794e+2, 4.6310396098204458e+1, -7.9237387133614756e-6,
     -1.4510726927018646e+1, 1.1111771248100563e+1, -4.1690817945270892, 3.1008219800117808e-3,
     1.1220095449981468, -7.6052379926149916e-1, 3.6262236505085254e-1, 2.216867741940747e-1,
     4.8683443692930507e-1},
};

static tp_hlo_value_t igam_asymptotic(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t x, tp_hlo_value_t on, bool igam,
                             const igam_consts_t *c) {
  tp_hlo_value_t one = tp_k(b, 1, a), zero = tp_k(b, 0, a);
  tp_hlo_value_t lambda = tp_div(b, x, a), sigma = tp_div(b, tp_sub(b, x, a), a);
  tp_hlo_value_t e = tp_un(b, TP_HLO_SQRT, tp_mul(b, tp_k(b, -2, a), tp_sub(b, tp_un(b, TP_HLO_LOG1P, sigma), sigma)));
  tp_hlo_value_t eta = tp_sel(b, tp_cmpk(b, TP_CMP_GT, lambda, 1), e,
                  tp_sel(b, tp_cmpk(b, TP_CMP_LT, lambda, 1), tp_un(b, TP_HLO_NEG, e), zero));
  double sgn = igam ? -1 : 1;
  tp_hlo_value_t res = tp_mul(b, tp_k(b, 0.5, a), tp_un(b, TP_HLO_ERFC, tp_mul(b, tp_mul(b, tp_k(b, sgn, a), eta),
                                                          tp_un(b, TP_HLO_SQRT, tp_div(b, a, tp_k(b, 2, a))))));
  /* The table as a [25, 25] constant; the k-th row is read by a dynamic slice. */
  tp_hlo_value_t cells[625];
  int64_t one_dim = 1, rc[2] = {25, 25};
  for (int k = 0; k < 25; k++)
    for (int n = 0; n < 25; n++)
      cells[k * 25 + n] = tp_hlo_reshape(b, tp_hlo_constant(b, a.dtype, kIgamD[k][n]), 1, &one_dim);
  tp_hlo_value_t table = tp_hlo_reshape(b, tp_hlo_concatenate(b, cells, 625, 0), 2, rc);
  /* k, sum, afac, absoldterm, on */
  tp_hlo_value_t init[5] = {i32k(b, 0), zero, one, tp_k(b, __builtin_inf(), a), on}, s[5], o[5];
  tp_hlo_while_begin(b, init, 5, s);
  tp_hlo_while_body(b, tp_and(b, tp_cmp(b, TP_CMP_LT, s[0], i32k(b, 25)), any_true(b, s[4])), s);
  tp_hlo_value_t start[2] = {s[0], i32k(b, 0)};
  int64_t row_size[2] = {1, 25};
  tp_hlo_value_t row = tp_hlo_dynamic_slice(b, table, start, row_size);
  tp_hlo_value_t d[25];
  for (int n = 0; n < 25; n++) {
    int64_t lo[2] = {0, n}, hi[2] = {1, n + 1}, st[2] = {1, 1};
    d[n] = tp_hlo_broadcast_to(b, tp_hlo_reshape(b, tp_hlo_slice(b, row, lo, hi, st), 0, NULL),
                               a.ndim, a.dims);
  }
  /* the inner sum over n, stopping at the first term below epsilon relative to the sum */
  tp_hlo_value_t ck = d[0], etapow = one, inner = s[4];
  for (int n = 1; n < 25; n++) {
    etapow = tp_mul(b, eta, etapow);
    tp_hlo_value_t ckterm = tp_mul(b, d[n], etapow), ck1 = tp_add(b, ck, ckterm);
    ck = tp_sel(b, inner, ck1, ck);
    inner = tp_and(b, inner, tp_cmp(b, TP_CMP_GE, tp_un(b, TP_HLO_ABS, ckterm),
                               tp_mul(b, tp_k(b, c->machep, a), tp_un(b, TP_HLO_ABS, ck1))));
  }
  tp_hlo_value_t term = tp_mul(b, ck, s[2]), absterm = tp_un(b, TP_HLO_ABS, term);
  tp_hlo_value_t keep = tp_and(b, s[4], tp_not(b, tp_cmp(b, TP_CMP_GT, absterm, s[3])));
  tp_hlo_value_t sum = tp_sel(b, keep, tp_add(b, s[1], term), s[1]);
  tp_hlo_value_t cont = tp_and(b, keep, tp_not(b, tp_cmp(b, TP_CMP_LT, absterm, tp_mul(b, tp_k(b, c->machep, a),
                                                                       tp_un(b, TP_HLO_ABS, sum)))));
  tp_hlo_value_t next[5] = {tp_hlo_binary(b, TP_HLO_ADD, s[0], i32k(b, 1)), sum,
                   tp_sel(b, cont, tp_div(b, s[2], a), s[2]), tp_sel(b, cont, absterm, s[3]), cont};
  tp_hlo_while_end(b, next, o);
  /* sqrt(2 pi a), with pi in float as the kernel writes c10::pi<float> */
  tp_hlo_value_t root = tp_un(b, TP_HLO_SQRT, tp_mul(b, tp_k(b, 2 * (double)(float)3.14159265358979323846, a), a));
  tp_hlo_value_t tail = tp_div(b, tp_mul(b, tp_mul(b, tp_k(b, sgn, a),
                                 tp_un(b, TP_HLO_EXP, tp_mul(b, tp_mul(b, tp_mul(b, tp_k(b, -0.5, a), a), eta), eta))),
                          o[1]),
                   root);
  return tp_add(b, res, tail);
}

/* igamma (|upper| false) or igammac of float a and x: the boundary values, then the method each
 * region takes, as calc_igamma and calc_igammac choose it. */
static tp_hlo_value_t incomplete_gamma(tp_hlo_builder_t *b, tp_hlo_value_t a, tp_hlo_value_t x, bool upper) {
  igam_consts_t c = igam_consts(a);
  tp_hlo_value_t one = tp_k(b, 1, a), nan = tp_k(b, __builtin_nan(""), a);
  tp_hlo_value_t absxma = tp_div(b, tp_un(b, TP_HLO_ABS, tp_sub(b, x, a)), a);
  tp_hlo_value_t asym = tp_or(b, tp_and(b, tp_and(b, tp_cmpk(b, TP_CMP_GT, a, 20), tp_cmpk(b, TP_CMP_LT, a, 200)),
                           tp_cmpk(b, TP_CMP_LT, absxma, 0.3)),
                   tp_and(b, tp_cmpk(b, TP_CMP_GT, a, 200),
                        tp_cmp(b, TP_CMP_LT, absxma, tp_div(b, tp_k(b, 4.5, a), tp_un(b, TP_HLO_SQRT, a)))));
  tp_hlo_value_t boundary = tp_or(b, tp_or(b, tp_cmpk(b, TP_CMP_LT, x, 0), tp_cmpk(b, TP_CMP_LT, a, 0)),
                       tp_or(b, tp_or(b, tp_cmpk(b, TP_CMP_EQ, a, 0), tp_cmpk(b, TP_CMP_EQ, x, 0)),
                           tp_or(b, tp_un(b, TP_HLO_IS_INF, a), tp_un(b, TP_HLO_IS_INF, x))));
  tp_hlo_value_t open = tp_and(b, tp_not(b, boundary), tp_not(b, asym));
  /* igammac's choice: P by series (then 1 - P), Q by the fraction, or Q by its series */
  tp_hlo_value_t gt11 = tp_cmpk(b, TP_CMP_GT, x, 1.1), le05 = tp_cmpk(b, TP_CMP_LE, x, 0.5);
  tp_hlo_value_t p_small = tp_sel(b, gt11, tp_cmp(b, TP_CMP_LT, x, a),
                      tp_sel(b, le05, tp_cmp(b, TP_CMP_LT, tp_div(b, tp_k(b, -0.4, a), tp_un(b, TP_HLO_LOG, x)), a),
                          tp_cmp(b, TP_CMP_LT, tp_mul(b, x, tp_k(b, 1.1, a)), a)));
  tp_hlo_value_t use_p, use_frac, use_qser;
  if (upper) {
    use_p = tp_and(b, open, p_small);
    use_frac = tp_and(b, open, tp_and(b, gt11, tp_not(b, p_small)));
    use_qser = tp_and(b, open, tp_and(b, tp_not(b, gt11), tp_not(b, p_small)));
  } else { /* igamma: 1 - Q where x > 1 and x > a (Q by the fraction above 1.1), else P */
    tp_hlo_value_t q = tp_and(b, tp_cmpk(b, TP_CMP_GT, x, 1), tp_cmp(b, TP_CMP_GT, x, a));
    use_p = tp_and(b, open, tp_not(b, q));
    use_frac = tp_and(b, open, tp_and(b, q, gt11));
    use_qser = tp_and(b, open, tp_and(b, q, tp_not(b, gt11)));
  }
  tp_hlo_value_t p = igam_series(b, a, x, use_p, &c);
  tp_hlo_value_t q = tp_sel(b, use_frac, igamc_fraction(b, a, x, use_frac, &c), igamc_series(b, a, x, use_qser, &c));
  tp_hlo_value_t r = upper ? tp_sel(b, use_p, tp_sub(b, one, p), q) : tp_sel(b, use_p, p, tp_sub(b, one, q));
  r = tp_sel(b, asym, igam_asymptotic(b, a, x, asym, !upper, &c), r);
  /* boundaries, last checked first */
  tp_hlo_value_t at_inf = upper ? tp_k(b, 0, a) : one, at_zero = upper ? one : tp_k(b, 0, a);
  r = tp_sel(b, tp_un(b, TP_HLO_IS_INF, x), at_inf, r);
  r = tp_sel(b, tp_un(b, TP_HLO_IS_INF, a), tp_sel(b, tp_un(b, TP_HLO_IS_INF, x), nan, at_zero), r);
  r = tp_sel(b, tp_cmpk(b, TP_CMP_EQ, x, 0), at_zero, r);
  r = tp_sel(b, tp_cmpk(b, TP_CMP_EQ, a, 0), tp_sel(b, tp_cmpk(b, TP_CMP_GT, x, 0), at_inf, nan), r);
  return tp_sel(b, tp_or(b, tp_cmpk(b, TP_CMP_LT, x, 0), tp_cmpk(b, TP_CMP_LT, a, 0)), nan, r);
}

/* ---- the op family ---- */

static bool is_binary(tp_special_t code) { return code >= TP_SP_BINARY; }
static bool is_igamma(tp_special_t code) { return code == TP_SP_IGAMMA || code == TP_SP_IGAMMAC; }

/* ---- Special functions of the unary and binary families (families.h): i0e, erfcx, log_ndtr,
 * digamma, Hurwitz zeta and polygamma ---- */

/* exp(-|x|) * I0(|x|): the power series sum (x^2/4)^k / k!^2 below 12, the asymptotic
 * expansion sum c_k / |x|^k / sqrt(2 pi |x|), c_k = ((2k-1)!!)^2 / (k! 8^k), above; both
 * are within 1e-9 of the true value there. */
tp_hlo_value_t tp_emit_i0e(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  tp_hlo_value_t a = tp_hlo_unary(b, TP_HLO_ABS, x);
  tp_hlo_value_t small = tp_hlo_compare(b, TP_CMP_LE, a, tp_k(b, 12, a));
  tp_hlo_value_t as = tp_hlo_select(b, small, a, tp_k(b, 12, a)); /* keeps each branch finite */
  tp_hlo_value_t al = tp_hlo_select(b, small, tp_k(b, 12, a), a);
  tp_hlo_value_t q = tp_mul(b, tp_mul(b, as, as), tp_k(b, 0.25, a));
  /* Both sums in Horner form, 1 + t_1 (1 + t_2 (1 + ...)) with t_k the ratio of consecutive
   * terms: a plain running product of constants could be reassociated into an overflow. */
  tp_hlo_value_t sum = tp_k(b, 1, a);
  for (int k = 36; k >= 1; k--)
    sum = tp_add(b, tp_k(b, 1, a), tp_mul(b, sum, tp_mul(b, q, tp_k(b, 1.0 / ((double)k * k), a))));
  tp_hlo_value_t series = tp_mul(b, sum, tp_hlo_unary(b, TP_HLO_EXP, tp_hlo_unary(b, TP_HLO_NEG, as)));
  tp_hlo_value_t r = tp_hlo_binary(b, TP_HLO_DIV, tp_k(b, 1, a), al);
  tp_hlo_value_t asum = tp_k(b, 1, a);
  for (int k = 12; k >= 1; k--)
    asum = tp_add(b, tp_k(b, 1, a),
               tp_mul(b, asum, tp_mul(b, r, tp_k(b, (2.0 * k - 1) * (2.0 * k - 1) / (8.0 * k), a))));
  tp_hlo_value_t asym = tp_mul(b, asum, tp_hlo_unary(b, TP_HLO_RSQRT,
                                                 tp_mul(b, al, tp_k(b, 6.283185307179586, a))));
  return tp_hlo_select(b, small, series, asym);
}

/* exp(x^2) * erfc(x): directly below 5, by the asymptotic series
 * 1/(x sqrt(pi)) * sum (-1)^k (2k-1)!! / (2x^2)^k above (erfc would underflow there). */
tp_hlo_value_t tp_emit_erfcx(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  tp_hlo_value_t big = tp_hlo_compare(b, TP_CMP_GT, x, tp_k(b, 5, x));
  tp_hlo_value_t xs = tp_hlo_select(b, big, tp_k(b, 5, x), x);
  tp_hlo_value_t xl = tp_hlo_select(b, big, x, tp_k(b, 5, x));
  tp_hlo_value_t direct = tp_mul(b, tp_hlo_unary(b, TP_HLO_EXP, tp_mul(b, xs, xs)),
                              tp_hlo_unary(b, TP_HLO_ERFC, xs));
  tp_hlo_value_t r = tp_hlo_binary(b, TP_HLO_DIV, tp_k(b, 0.5, x), tp_mul(b, xl, xl));
  tp_hlo_value_t sum = tp_k(b, 1, x);
  for (int k = 12; k >= 1; k--)
    sum = tp_add(b, tp_k(b, 1, x), tp_mul(b, sum, tp_mul(b, r, tp_k(b, -(2.0 * k - 1), x))));
  tp_hlo_value_t asym = tp_hlo_binary(b, TP_HLO_DIV, sum, tp_mul(b, xl, tp_k(b, 1.7724538509055160, x)));
  /* erfcx(inf) = 0; the series gives it, but keep NaN and inf exact. */
  return tp_hlo_select(b, big, asym, direct);
}

/* log of the standard normal CDF: log1p(-erfc(x/sqrt2)/2), or for x < -1, where that loses
 * everything, log(erfcx(-x/sqrt2)/2) - x^2/2. */
tp_hlo_value_t tp_emit_log_ndtr(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  tp_hlo_value_t t = tp_mul(b, x, tp_k(b, 0.70710678118654752, x));
  tp_hlo_value_t low = tp_hlo_compare(b, TP_CMP_LT, x, tp_k(b, -1, x));
  tp_hlo_value_t tl = tp_hlo_select(b, low, t, tp_k(b, -1, x));
  tp_hlo_value_t th = tp_hlo_select(b, low, tp_k(b, 0, x), t);
  tp_hlo_value_t lo = tp_hlo_binary(
      b, TP_HLO_SUB,
      tp_hlo_unary(b, TP_HLO_LOG, tp_mul(b, tp_emit_erfcx(b, tp_hlo_unary(b, TP_HLO_NEG, tl)), tp_k(b, 0.5, x))),
      tp_mul(b, tl, tl));
  tp_hlo_value_t hi = tp_hlo_unary(
      b, TP_HLO_LOG1P, tp_mul(b, tp_hlo_unary(b, TP_HLO_ERFC, th), tp_k(b, -0.5, x)));
  return tp_hlo_select(b, low, lo, hi);
}

/* PyTorch defines digamma(+-0) = -+inf. */
tp_hlo_value_t tp_emit_digamma(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  tp_hlo_value_t inf = tp_hlo_select(b, tp_emit_signbit(b, x), tp_k(b, __builtin_inf(), x),
                                     tp_k(b, -__builtin_inf(), x));
  return tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_EQ, x, tp_k(b, 0, x)), inf,
                       tp_hlo_unary(b, TP_HLO_DIGAMMA, x));
}

/* Hurwitz zeta(x, q) with the CPU kernel's special cases ahead of chlo's series: x == 1 gives
 * inf, x < 1 NaN; q a non-positive integer inf, other q <= 0 NaN unless x is an integer. */
tp_hlo_value_t tp_emit_zeta(tp_hlo_builder_t *b, tp_hlo_value_t x, tp_hlo_value_t q, int64_t int_x) {
  tp_hlo_value_t inf = tp_k(b, __builtin_inf(), x), nan = tp_k(b, __builtin_nan(""), x);
  /* As the CPU kernel does, the terms up to q + K > 9 are summed directly, in order (so a
   * negative q's terms cancel as there), then chlo's series takes the tail:
   * zeta(x, q) = sum_{k<K} (q + k)^-x + zeta(x, q + K). q below -16 loses accuracy. */
  tp_hlo_value_t kq = tp_hlo_unary(b, TP_HLO_CEIL, tp_hlo_binary(b, TP_HLO_SUB, tp_k(b, 9, q), q));
  kq = tp_hlo_binary(b, TP_HLO_MIN, tp_hlo_binary(b, TP_HLO_MAX, kq, tp_k(b, 0, q)), tp_k(b, 26, q));
  tp_hlo_value_t head = tp_k(b, 0, q), nx = tp_hlo_unary(b, TP_HLO_NEG, x);
  for (int k = 0; k < 26; k++) {
    tp_hlo_value_t base = tp_add(b, q, tp_k(b, k, q)), t;
    if (int_x > 0) { /* a known integer x (polygamma): exact products, so +-terms cancel */
      tp_hlo_value_t p = base;
      for (int64_t i = 1; i < int_x; i++) p = tp_mul(b, p, base);
      t = tp_hlo_binary(b, TP_HLO_DIV, tp_k(b, 1, q), p);
    } else {
      t = tp_hlo_binary(b, TP_HLO_POW, base, nx);
    }
    head = tp_add(b, head, tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_LT, tp_k(b, k, q), kq), t,
                                      tp_k(b, 0, q)));
  }
  tp_hlo_value_t tail = tp_hlo_binary(b, TP_HLO_ZETA, x, tp_add(b, q, kq));
  tp_hlo_value_t r = tp_add(b, tail, head);
  /* chlo's series is NaN for a huge x. CPU's direct sum stops once a term is negligible: at
   * the sum of the first terms when that is not 0 (+inf where |q + k| < 1 overflowed), and
   * only a sum of 0 goes on into its own series, NaN for that x too. */
  r = tp_hlo_select(b, tp_hlo_binary(b, TP_HLO_AND, tp_is_nan(b, tail),
                                     tp_hlo_compare(b, TP_CMP_NE, head, tp_k(b, 0, q))),
                    head, r);
  /* NaN goes into the series; the special cases come before it on CPU, so a NaN x with q a
   * non-positive integer (or -inf) is inf, a NaN q with x <= 1 is NaN or inf. */
  r = tp_hlo_select(b, tp_hlo_binary(b, TP_HLO_OR, tp_is_nan(b, x), tp_is_nan(b, q)), tp_add(b, x, q), r);
  tp_hlo_value_t qneg = tp_hlo_compare(b, TP_CMP_LE, q, tp_k(b, 0, q));
  tp_hlo_value_t xint = tp_hlo_compare(b, TP_CMP_EQ, x, tp_hlo_unary(b, TP_HLO_FLOOR, x));
  tp_hlo_value_t qint = tp_hlo_compare(b, TP_CMP_EQ, q, tp_hlo_unary(b, TP_HLO_FLOOR, q));
  r = tp_hlo_select(b, tp_hlo_binary(b, TP_HLO_AND, qneg, tp_hlo_unary(b, TP_HLO_NOT, xint)), nan, r);
  r = tp_hlo_select(b, tp_hlo_binary(b, TP_HLO_AND, qneg, qint), inf, r);
  r = tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_LT, x, tp_k(b, 1, x)), nan, r);
  return tp_hlo_select(b, tp_hlo_compare(b, TP_CMP_EQ, x, tp_k(b, 1, x)), inf, r);
}

/* trigamma by reflection below 1/2, six recurrence steps and the asymptotic series, as the
 * CPU kernel computes it (so poles give the same large finite values). */
static tp_hlo_value_t trigamma(tp_hlo_builder_t *b, tp_hlo_value_t x) {
  tp_hlo_value_t one = tp_k(b, 1, x);
  tp_hlo_value_t refl = tp_hlo_compare(b, TP_CMP_LT, x, tp_k(b, 0.5, x));
  tp_hlo_value_t s = tp_hlo_unary(b, TP_HLO_SIN, tp_mul(b, x, tp_k(b, 3.14159265358979323846, x)));
  tp_hlo_value_t r0 = tp_hlo_binary(b, TP_HLO_DIV, tp_k(b, -9.8696044010893586, x), tp_mul(b, s, s));
  tp_hlo_value_t r = tp_hlo_select(b, refl, r0, tp_k(b, 0, x));
  tp_hlo_value_t z = tp_hlo_select(b, refl, tp_hlo_binary(b, TP_HLO_SUB, one, x), x);
  for (int i = 0; i < 6; i++) {
    r = tp_add(b, r, tp_hlo_binary(b, TP_HLO_DIV, one, tp_mul(b, z, z)));
    z = tp_add(b, z, one);
  }
  tp_hlo_value_t ixx = tp_hlo_binary(b, TP_HLO_DIV, one, tp_mul(b, z, z));
  tp_hlo_value_t t = tp_mul(b, ixx, tp_hlo_binary(b, TP_HLO_SUB, tp_k(b, 1.0 / 30, x), tp_mul(b, ixx, tp_k(b, 1.0 / 42, x))));
  t = tp_mul(b, ixx, tp_hlo_binary(b, TP_HLO_SUB, tp_k(b, 1.0 / 6, x), t));
  t = tp_add(b, tp_add(b, one, tp_hlo_binary(b, TP_HLO_DIV, one, tp_mul(b, z, tp_k(b, 2, x)))), t);
  r = tp_add(b, r, tp_hlo_binary(b, TP_HLO_DIV, t, z));
  return tp_hlo_select(b, refl, tp_hlo_unary(b, TP_HLO_NEG, r), r);
}

/* polygamma(n, x) as the CPU kernel defines it: digamma, trigamma, then
 * (-1)^(n+1) n! zeta(n + 1, x). */
tp_hlo_value_t tp_emit_polygamma(tp_hlo_builder_t *b, int64_t n, tp_hlo_value_t x) {
  if (n == 0) return tp_emit_digamma(b, x);
  if (n == 1) return trigamma(b, x);
  double f = (n % 2) ? 1.0 : -1.0;
  for (int64_t i = 2; i <= n; i++) f *= (double)i;
  return tp_mul(b, tp_k(b, f, x), tp_emit_zeta(b, tp_k(b, (double)(n + 1), x), x, n <= 32 ? n + 1 : -1));
}

tp_status_t *tp_infer_special(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                              tp_meta_t *out, int *n_out) {
  tp_special_t code = (tp_special_t)op->code;
  int n = is_binary(code) ? 2 : 1;
  const tp_meta_t *shape = NULL;
  for (int i = 0; i < n && i < n_args; i++)
    if (args[i].kind == TP_ARG_TENSOR) shape = &args[i].meta;
  if (n_args < n || !shape ||
      (args[0].kind != TP_ARG_TENSOR && args[0].kind != TP_ARG_SCALAR) ||
      (args[n - 1].kind != TP_ARG_TENSOR && args[n - 1].kind != TP_ARG_SCALAR))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected tensor arguments", op->name);
  tp_meta_t m = *shape;
  if (n == 2 && args[0].kind == TP_ARG_TENSOR && args[1].kind == TP_ARG_TENSOR)
    TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &args[1].meta, &m));
  m.dtype = tp_result_type(args, n);
  /* igamma has no integer kernel and computes 16-bit floats in float32; the others promote
   * integers and have no 16-bit kernel. Calls without a CPU kernel fall back: CPU raises. */
  if (!tp_dtype_is_float(m.dtype)) {
    if (!(op->flags & TP_OPF_FLOAT_RESULT))
      return tp_make_status(TP_UNIMPLEMENTED, "%s of integers", op->name);
    m.dtype = TP_DTYPE_F32;
  }
  if ((m.dtype == TP_DTYPE_BF16 || m.dtype == TP_DTYPE_F16) && !is_igamma(code))
    return tp_make_status(TP_UNIMPLEMENTED, "%s of a 16-bit float", op->name);
  for (int i = 0; i < n; i++)
    if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = m.dtype;
  m.writes_arg = 0;
  out[0] = m;
  *n_out = 1;
  return NULL;
}

void tp_emit_special(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                     int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                     tp_hlo_value_t *out) {
  tp_special_t code = (tp_special_t)op->code;
  tp_dtype_t md = tp_math_dtype(out_meta[0].dtype);
  tp_hlo_value_t x = tp_emit_cast_shape(b, in[0], md, &out_meta[0]);
  if (is_igamma(code)) {
    tp_hlo_value_t y = tp_emit_cast_shape(b, in[1], md, &out_meta[0]);
    out[0] = tp_hlo_convert(b, incomplete_gamma(b, x, y, code == TP_SP_IGAMMAC), out_meta[0].dtype);
    return;
  }
  switch (code) {
    case TP_SP_AIRY_AI: out[0] = airy_ai(b, x); return;
    case TP_SP_BESSEL_J0: out[0] = bessel_j0_abs(b, tp_un(b, TP_HLO_ABS, x)); return;
    case TP_SP_BESSEL_J1: out[0] = bessel_j1(b, x); return;
    case TP_SP_BESSEL_Y0: out[0] = bessel_y(b, x, 0); return;
    case TP_SP_BESSEL_Y1: out[0] = bessel_y(b, x, 1); return;
    case TP_SP_MODIFIED_BESSEL_I0: out[0] = modified_bessel_i(b, x, 0); return;
    case TP_SP_MODIFIED_BESSEL_I1: out[0] = modified_bessel_i(b, x, 1); return;
    case TP_SP_MODIFIED_BESSEL_K0: out[0] = modified_bessel_k(b, x, 0, false); return;
    case TP_SP_MODIFIED_BESSEL_K1: out[0] = modified_bessel_k(b, x, 1, false); return;
    case TP_SP_SCALED_MODIFIED_BESSEL_K0: out[0] = modified_bessel_k(b, x, 0, true); return;
    case TP_SP_SCALED_MODIFIED_BESSEL_K1: out[0] = modified_bessel_k(b, x, 1, true); return;
    case TP_SP_SPHERICAL_BESSEL_J0: out[0] = spherical_bessel_j0(b, x); return;
    default:
      out[0] = polynomial(b, code, x, tp_emit_cast_shape(b, in[1], md, &out_meta[0]));
      return;
  }
}
