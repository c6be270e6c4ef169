module @tp {
  func.func public @main(%v0: tensor<1x3x2xf32>) -> (tensor<1x2x1xf32>) {
    %v1 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v2 = "stablehlo.broadcast_in_dim"(%v1) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v3 = "stablehlo.compare"(%v2, %v2) {comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi1>
    %v4 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<1x2x1xi64>
    %v5 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v6 = "stablehlo.broadcast_in_dim"(%v5) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v7 = "stablehlo.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64>
    %v8 = "stablehlo.broadcast_in_dim"(%v7) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v9 = "stablehlo.multiply"(%v4, %v8) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v10 = "stablehlo.divide"(%v9, %v6) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v11 = "stablehlo.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64>
    %v12 = "stablehlo.broadcast_in_dim"(%v11) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v13 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v14 = "stablehlo.broadcast_in_dim"(%v13) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v15 = "stablehlo.add"(%v4, %v14) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v16 = "stablehlo.multiply"(%v15, %v12) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v17 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v18 = "stablehlo.broadcast_in_dim"(%v17) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v19 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v20 = "stablehlo.broadcast_in_dim"(%v19) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v21 = "stablehlo.add"(%v16, %v20) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v22 = "stablehlo.divide"(%v21, %v18) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v23 = "stablehlo.subtract"(%v22, %v10) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v24 = "stablehlo.subtract"(%v22, %v10) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v25 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v26 = "stablehlo.broadcast_in_dim"(%v25) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v27 = "stablehlo.compare"(%v24, %v26) {comparison_direction = #stablehlo<comparison_direction LE>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi1>
    %v28 = "stablehlo.or"(%v3, %v27) : (tensor<1x2x1xi1>, tensor<1x2x1xi1>) -> tensor<1x2x1xi1>
    %v29 = "stablehlo.multiply"(%v2, %v24) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v30 = "stablehlo.iota"() {iota_dimension = 2 : i64} : () -> tensor<1x2x1xi64>
    %v31 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v32 = "stablehlo.broadcast_in_dim"(%v31) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v33 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v34 = "stablehlo.broadcast_in_dim"(%v33) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v35 = "stablehlo.multiply"(%v30, %v34) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v36 = "stablehlo.divide"(%v35, %v32) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v37 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v38 = "stablehlo.broadcast_in_dim"(%v37) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v39 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v40 = "stablehlo.broadcast_in_dim"(%v39) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v41 = "stablehlo.add"(%v30, %v40) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v42 = "stablehlo.multiply"(%v41, %v38) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v43 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v44 = "stablehlo.broadcast_in_dim"(%v43) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v45 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v46 = "stablehlo.broadcast_in_dim"(%v45) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v47 = "stablehlo.add"(%v42, %v46) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v48 = "stablehlo.divide"(%v47, %v44) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v49 = "stablehlo.subtract"(%v48, %v36) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v50 = "stablehlo.subtract"(%v48, %v36) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v51 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v52 = "stablehlo.broadcast_in_dim"(%v51) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v53 = "stablehlo.compare"(%v50, %v52) {comparison_direction = #stablehlo<comparison_direction LE>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi1>
    %v54 = "stablehlo.or"(%v28, %v53) : (tensor<1x2x1xi1>, tensor<1x2x1xi1>) -> tensor<1x2x1xi1>
    %v55 = "stablehlo.multiply"(%v29, %v50) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v56 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v57 = "stablehlo.broadcast_in_dim"(%v56) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v58 = "stablehlo.select"(%v54, %v57, %v55) : (tensor<1x2x1xi1>, tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v59 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v60 = "stablehlo.broadcast_in_dim"(%v59) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v61 = "stablehlo.compare"(%v58, %v60) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi1>
    %v62 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<1x2x2xi64>
    %v63 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v64 = "stablehlo.broadcast_in_dim"(%v63) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v65 = "stablehlo.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64>
    %v66 = "stablehlo.broadcast_in_dim"(%v65) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v67 = "stablehlo.multiply"(%v62, %v66) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v68 = "stablehlo.divide"(%v67, %v64) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v69 = "stablehlo.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64>
    %v70 = "stablehlo.broadcast_in_dim"(%v69) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v71 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v72 = "stablehlo.broadcast_in_dim"(%v71) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v73 = "stablehlo.add"(%v62, %v72) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v74 = "stablehlo.multiply"(%v73, %v70) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v75 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v76 = "stablehlo.broadcast_in_dim"(%v75) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v77 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v78 = "stablehlo.broadcast_in_dim"(%v77) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v79 = "stablehlo.add"(%v74, %v78) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v80 = "stablehlo.divide"(%v79, %v76) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v81 = "stablehlo.subtract"(%v80, %v68) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v82 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %v83 = "stablehlo.broadcast_in_dim"(%v82) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<1x2x2xf32>
    %v84 = "stablehlo.reshape"(%v0) : (tensor<1x3x2xf32>) -> tensor<6xf32>
    %v85 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v86 = "stablehlo.broadcast_in_dim"(%v85) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v87 = "stablehlo.add"(%v68, %v86) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v88 = "stablehlo.compare"(%v87, %v80) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi1>
    %v89 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v90 = "stablehlo.broadcast_in_dim"(%v89) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v91 = "stablehlo.minimum"(%v87, %v90) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v92 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v93 = "stablehlo.broadcast_in_dim"(%v92) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v94 = "stablehlo.iota"() {iota_dimension = 2 : i64} : () -> tensor<1x2x2xi64>
    %v95 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v96 = "stablehlo.broadcast_in_dim"(%v95) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v97 = "stablehlo.multiply"(%v94, %v96) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v98 = "stablehlo.add"(%v93, %v97) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v99 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v100 = "stablehlo.broadcast_in_dim"(%v99) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v101 = "stablehlo.multiply"(%v91, %v100) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v102 = "stablehlo.add"(%v98, %v101) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v103 = "stablehlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<1x2x2xi64>
    %v104 = "stablehlo.constant"() {value = dense<6> : tensor<i64>} : () -> tensor<i64>
    %v105 = "stablehlo.broadcast_in_dim"(%v104) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v106 = "stablehlo.multiply"(%v103, %v105) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v107 = "stablehlo.add"(%v102, %v106) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v108 = "stablehlo.reshape"(%v107) : (tensor<1x2x2xi64>) -> tensor<4xi64>
    %v109 = "stablehlo.gather"(%v84, %v108) {dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1>, indices_are_sorted = false} : (tensor<6xf32>, tensor<4xi64>) -> tensor<4xf32>
    %v110 = "stablehlo.reshape"(%v109) : (tensor<4xf32>) -> tensor<1x2x2xf32>
    %v111 = "stablehlo.select"(%v88, %v110, %v83) : (tensor<1x2x2xi1>, tensor<1x2x2xf32>, tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
    %v112 = "stablehlo.add"(%v83, %v111) : (tensor<1x2x2xf32>, tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
    %v113 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v114 = "stablehlo.broadcast_in_dim"(%v113) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v115 = "stablehlo.add"(%v68, %v114) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v116 = "stablehlo.compare"(%v115, %v80) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi1>
    %v117 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v118 = "stablehlo.broadcast_in_dim"(%v117) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v119 = "stablehlo.minimum"(%v115, %v118) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v120 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v121 = "stablehlo.broadcast_in_dim"(%v120) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v122 = "stablehlo.iota"() {iota_dimension = 2 : i64} : () -> tensor<1x2x2xi64>
    %v123 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v124 = "stablehlo.broadcast_in_dim"(%v123) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v125 = "stablehlo.multiply"(%v122, %v124) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v126 = "stablehlo.add"(%v121, %v125) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v127 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v128 = "stablehlo.broadcast_in_dim"(%v127) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v129 = "stablehlo.multiply"(%v119, %v128) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v130 = "stablehlo.add"(%v126, %v129) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v131 = "stablehlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<1x2x2xi64>
    %v132 = "stablehlo.constant"() {value = dense<6> : tensor<i64>} : () -> tensor<i64>
    %v133 = "stablehlo.broadcast_in_dim"(%v132) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x2xi64>
    %v134 = "stablehlo.multiply"(%v131, %v133) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v135 = "stablehlo.add"(%v130, %v134) : (tensor<1x2x2xi64>, tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %v136 = "stablehlo.reshape"(%v135) : (tensor<1x2x2xi64>) -> tensor<4xi64>
    %v137 = "stablehlo.gather"(%v84, %v136) {dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1>, indices_are_sorted = false} : (tensor<6xf32>, tensor<4xi64>) -> tensor<4xf32>
    %v138 = "stablehlo.reshape"(%v137) : (tensor<4xf32>) -> tensor<1x2x2xf32>
    %v139 = "stablehlo.select"(%v116, %v138, %v83) : (tensor<1x2x2xi1>, tensor<1x2x2xf32>, tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
    %v140 = "stablehlo.add"(%v112, %v139) : (tensor<1x2x2xf32>, tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
    %v141 = "stablehlo.iota"() {iota_dimension = 2 : i64} : () -> tensor<1x2x1xi64>
    %v142 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v143 = "stablehlo.broadcast_in_dim"(%v142) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v144 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v145 = "stablehlo.broadcast_in_dim"(%v144) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v146 = "stablehlo.multiply"(%v141, %v145) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v147 = "stablehlo.divide"(%v146, %v143) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v148 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v149 = "stablehlo.broadcast_in_dim"(%v148) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v150 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v151 = "stablehlo.broadcast_in_dim"(%v150) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v152 = "stablehlo.add"(%v141, %v151) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v153 = "stablehlo.multiply"(%v152, %v149) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v154 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v155 = "stablehlo.broadcast_in_dim"(%v154) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v156 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v157 = "stablehlo.broadcast_in_dim"(%v156) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v158 = "stablehlo.add"(%v153, %v157) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v159 = "stablehlo.divide"(%v158, %v155) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v160 = "stablehlo.subtract"(%v159, %v147) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v161 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %v162 = "stablehlo.broadcast_in_dim"(%v161) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<1x2x1xf32>
    %v163 = "stablehlo.reshape"(%v140) : (tensor<1x2x2xf32>) -> tensor<4xf32>
    %v164 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v165 = "stablehlo.broadcast_in_dim"(%v164) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v166 = "stablehlo.add"(%v147, %v165) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v167 = "stablehlo.compare"(%v166, %v159) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi1>
    %v168 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v169 = "stablehlo.broadcast_in_dim"(%v168) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v170 = "stablehlo.minimum"(%v166, %v169) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v171 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v172 = "stablehlo.broadcast_in_dim"(%v171) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v173 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v174 = "stablehlo.broadcast_in_dim"(%v173) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v175 = "stablehlo.multiply"(%v170, %v174) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v176 = "stablehlo.add"(%v172, %v175) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v177 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<1x2x1xi64>
    %v178 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v179 = "stablehlo.broadcast_in_dim"(%v178) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v180 = "stablehlo.multiply"(%v177, %v179) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v181 = "stablehlo.add"(%v176, %v180) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v182 = "stablehlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<1x2x1xi64>
    %v183 = "stablehlo.constant"() {value = dense<4> : tensor<i64>} : () -> tensor<i64>
    %v184 = "stablehlo.broadcast_in_dim"(%v183) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v185 = "stablehlo.multiply"(%v182, %v184) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v186 = "stablehlo.add"(%v181, %v185) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v187 = "stablehlo.reshape"(%v186) : (tensor<1x2x1xi64>) -> tensor<2xi64>
    %v188 = "stablehlo.gather"(%v163, %v187) {dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1>, indices_are_sorted = false} : (tensor<4xf32>, tensor<2xi64>) -> tensor<2xf32>
    %v189 = "stablehlo.reshape"(%v188) : (tensor<2xf32>) -> tensor<1x2x1xf32>
    %v190 = "stablehlo.select"(%v167, %v189, %v162) : (tensor<1x2x1xi1>, tensor<1x2x1xf32>, tensor<1x2x1xf32>) -> tensor<1x2x1xf32>
    %v191 = "stablehlo.add"(%v162, %v190) : (tensor<1x2x1xf32>, tensor<1x2x1xf32>) -> tensor<1x2x1xf32>
    %v192 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v193 = "stablehlo.broadcast_in_dim"(%v192) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v194 = "stablehlo.add"(%v147, %v193) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v195 = "stablehlo.compare"(%v194, %v159) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi1>
    %v196 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v197 = "stablehlo.broadcast_in_dim"(%v196) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v198 = "stablehlo.minimum"(%v194, %v197) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v199 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v200 = "stablehlo.broadcast_in_dim"(%v199) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v201 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v202 = "stablehlo.broadcast_in_dim"(%v201) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v203 = "stablehlo.multiply"(%v198, %v202) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v204 = "stablehlo.add"(%v200, %v203) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v205 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<1x2x1xi64>
    %v206 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v207 = "stablehlo.broadcast_in_dim"(%v206) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v208 = "stablehlo.multiply"(%v205, %v207) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v209 = "stablehlo.add"(%v204, %v208) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v210 = "stablehlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<1x2x1xi64>
    %v211 = "stablehlo.constant"() {value = dense<4> : tensor<i64>} : () -> tensor<i64>
    %v212 = "stablehlo.broadcast_in_dim"(%v211) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v213 = "stablehlo.multiply"(%v210, %v212) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v214 = "stablehlo.add"(%v209, %v213) : (tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v215 = "stablehlo.reshape"(%v214) : (tensor<1x2x1xi64>) -> tensor<2xi64>
    %v216 = "stablehlo.gather"(%v163, %v215) {dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1>, indices_are_sorted = false} : (tensor<4xf32>, tensor<2xi64>) -> tensor<2xf32>
    %v217 = "stablehlo.reshape"(%v216) : (tensor<2xf32>) -> tensor<1x2x1xf32>
    %v218 = "stablehlo.select"(%v195, %v217, %v162) : (tensor<1x2x1xi1>, tensor<1x2x1xf32>, tensor<1x2x1xf32>) -> tensor<1x2x1xf32>
    %v219 = "stablehlo.add"(%v191, %v218) : (tensor<1x2x1xf32>, tensor<1x2x1xf32>) -> tensor<1x2x1xf32>
    %v220 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v221 = "stablehlo.broadcast_in_dim"(%v220) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<1x2x1xi64>
    %v222 = "stablehlo.select"(%v61, %v221, %v58) : (tensor<1x2x1xi1>, tensor<1x2x1xi64>, tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
    %v223 = "stablehlo.convert"(%v222) : (tensor<1x2x1xi64>) -> tensor<1x2x1xf32>
    %v224 = "stablehlo.divide"(%v219, %v223) : (tensor<1x2x1xf32>, tensor<1x2x1xf32>) -> tensor<1x2x1xf32>
    %v225 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %v226 = "stablehlo.broadcast_in_dim"(%v225) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<1x2x1xf32>
    %v227 = "stablehlo.select"(%v61, %v226, %v224) : (tensor<1x2x1xi1>, tensor<1x2x1xf32>, tensor<1x2x1xf32>) -> tensor<1x2x1xf32>
    "func.return"(%v227) : (tensor<1x2x1xf32>) -> ()
  }
}
